package dev.idem.spring;

import org.jspecify.annotations.Nullable;

/**
 * Turns a message body into the payload for a consumer declared in configuration, named by
 * {@code idem.consumers.<name>.decoder}. Whatever it throws makes that message a dead letter
 * ({@code UNDECODABLE_PAYLOAD}); the stream goes on. It runs on the broker client's thread: keep
 * it fast and non-blocking.
 *
 * @param <T> the payload type
 */
@FunctionalInterface
public interface MessageDecoder<T> {

  /**
   * Decodes one body.
   *
   * @param body the raw body, never {@code null}
   * @return the payload; {@code null} makes the message a dead letter (missing payload)
   * @throws Exception when the body cannot be decoded
   */
  @Nullable
  T decode(byte[] body) throws Exception;
}
