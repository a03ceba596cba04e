/** Implementation of the Kafka adapter; nothing here is API. */
@NullMarked
package dev.idem.kafka.internal;

import org.jspecify.annotations.NullMarked;
