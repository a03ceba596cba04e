package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * Turns a message body into the payload the handler sees.
 *
 * <p>A decoder may throw anything, {@link Error}s included ({@link StackOverflowError},
 * {@link AssertionError}, {@link OutOfMemoryError}, {@link LinkageError}): the {@link RabbitSource}
 * catches every {@link Throwable} and hands the pipeline a delivery whose
 * {@link dev.idem.Delivery#decodingFailure()} is that throwable, so the message is dead-lettered as
 * {@link dev.idem.DeadLetterReason#UNDECODABLE_PAYLOAD} with the error's class and message, and
 * the stream and its channel go on. A decoder runs on the client's consumer thread: keep it fast
 * and non-blocking.
 *
 * @param <T> the payload type
 */
@FunctionalInterface
public interface PayloadDecoder<T> {

  /**
   * Decodes one body.
   *
   * @param body the raw body, never {@code null} (empty for a message without body)
   * @param properties the message's AMQP properties
   * @return the payload; {@code null} makes the message dead-lettered as missing payload
   * @throws Exception when the body cannot be decoded
   */
  @Nullable
  T decode(byte[] body, AMQP.BasicProperties properties) throws Exception;

  /**
   * The body as UTF-8 text.
   *
   * @return a decoder that never fails
   */
  static PayloadDecoder<String> utf8() {
    return (body, properties) -> new String(body, StandardCharsets.UTF_8);
  }

  /**
   * The raw body.
   *
   * @return a decoder that never fails
   */
  static PayloadDecoder<byte[]> bytes() {
    return (body, properties) -> body;
  }
}
