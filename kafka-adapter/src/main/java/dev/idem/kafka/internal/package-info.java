/** Implementation of the Kafka adapter; nothing here is API. */
package dev.idem.kafka.internal;
