package dev.idem.kafka.internal;

import dev.idem.kafka.MessageIdExtractor;
import java.io.Serial;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.jspecify.annotations.Nullable;

/**
 * Resolves a record's message id: the extractor when one is configured, else the id header;
 * when neither yields a non-blank id, {@code topic/partition/offset} if the fallback is on.
 *
 * <p>The id header is decoded strictly as UTF-8: bytes that are not UTF-8 would otherwise become
 * replacement characters, and distinct ids ({@code FF 41}, {@code FE 41}) the same id, so the
 * second message would be skipped as a duplicate. A header that is not UTF-8, or that appears
 * several times with different values, makes the id {@linkplain InvalidIdException invalid}.
 *
 * @param <T> the payload type
 */
public final class MessageIds<T> {

  /** Bytes of a malformed id shown in its error message. */
  private static final int SHOWN_BYTES = 32;

  private final String header;
  private final @Nullable MessageIdExtractor<T> extractor;
  private final boolean offsetFallback;

  /**
   * @param header the id header
   * @param extractor the extractor, or {@code null}
   * @param offsetFallback whether to fall back to {@code topic/partition/offset}
   */
  public MessageIds(String header, @Nullable MessageIdExtractor<T> extractor, boolean offsetFallback) {
    this.header = header;
    this.extractor = extractor;
    this.offsetFallback = offsetFallback;
  }

  /**
   * Resolves the id.
   *
   * @param record the raw record
   * @param payload the decoded payload or {@code null}
   * @return the id, or {@code null} when there is none and the fallback is off
   * @throws InvalidIdException when the id header is not UTF-8 or appears with different values
   */
  public @Nullable String resolve(ConsumerRecord<byte[], byte[]> record, @Nullable T payload) {
    String id = extractor != null ? extractor.messageId(record, payload) : headerId(record.headers());
    if (id != null && !id.isBlank()) {
      return id;
    }
    return offsetFallback ? offsetId(record.topic(), record.partition(), record.offset()) : null;
  }

  private @Nullable String headerId(Headers headers) {
    // One header is the usual case: no list, no stream, no decoder object for an ASCII id.
    byte[] value = null;
    boolean found = false;
    List<byte[]> distinct = null;
    int count = 0;
    for (Header h : headers) {
      if (!header.equals(h.key())) {
        continue;
      }
      count++;
      if (!found) {
        found = true;
        value = h.value();
      } else if (!Arrays.equals(value, h.value())) {
        if (distinct == null) {
          distinct = new ArrayList<>();
          distinct.add(value);
        }
        if (distinct.stream().noneMatch(v -> Arrays.equals(v, h.value()))) {
          distinct.add(h.value());
        }
      }
    }
    if (distinct != null) {
      throw new InvalidIdException("header '" + header + "' appears " + count + " times with " + distinct.size()
          + " different values; producers disagree on the message's id");
    }
    return value == null ? null : strictUtf8(value);
  }

  /** The id's bytes as text, refusing bytes that are not UTF-8; an ASCII id is copied, not decoded. */
  private String strictUtf8(byte[] value) {
    if (isAscii(value)) {
      return new String(value, StandardCharsets.US_ASCII);
    }
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(value))
          .toString();
    } catch (CharacterCodingException e) {
      throw new InvalidIdException("header '" + header + "' is not valid UTF-8 (" + value.length + " bytes: " + hex(value) + ")");
    }
  }

  private static boolean isAscii(byte[] bytes) {
    for (byte b : bytes) {
      if (b < 0) {
        return false;
      }
    }
    return true;
  }

  private static String hex(byte[] bytes) {
    StringBuilder sb = new StringBuilder();
    for (byte b : Arrays.copyOf(bytes, Math.min(bytes.length, SHOWN_BYTES))) {
      if (!sb.isEmpty()) {
        sb.append(' ');
      }
      sb.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
    }
    return bytes.length > SHOWN_BYTES ? sb.append(" ...").toString() : sb.toString();
  }

  /**
   * The fallback id.
   *
   * @param topic the topic
   * @param partition the partition
   * @param offset the offset
   * @return {@code topic/partition/offset}
   */
  public static String offsetId(String topic, int partition, long offset) {
    return topic + "/" + partition + "/" + offset;
  }

  /**
   * The last value of a header as UTF-8, malformed bytes replaced: for display, never for ids.
   *
   * @param headers the headers
   * @param name the header name
   * @return the value, or {@code null} when absent or valueless
   */
  public static @Nullable String lastHeader(Headers headers, String name) {
    Header h = headers.lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  /** The id header of a record cannot be an id: it is not UTF-8, or it appears with different values. */
  public static final class InvalidIdException extends IllegalArgumentException {

    @Serial private static final long serialVersionUID = 1L;

    InvalidIdException(String message) {
      super(message);
    }
  }
}
