/**
 * Implementation of the RabbitMQ adapter (consumer sessions, settlement, ack coalescing, confirmed
 * publishing); nothing here is API.
 */
@NullMarked
package dev.idem.rabbit.internal;

import org.jspecify.annotations.NullMarked;
