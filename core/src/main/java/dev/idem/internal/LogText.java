package dev.idem.internal;

import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Keeps log lines and exception messages bounded: texts, errors and ids come from producers and
 * user code and can be arbitrarily long, so each is cut before it reaches a log line, with how
 * much was cut. The one cutter of core and both adapters; never splits a surrogate pair and never
 * throws, even for an object whose {@code toString()} does.
 */
public final class LogText {

  /** Longest text (an exception's message, a dead letter's detail) put in a log line: {@value}. */
  public static final int MAX_TEXT = 1_000;
  /** Longest id put in a log line: {@value}. */
  public static final int MAX_ID = 255;

  private LogText() {}

  /**
   * Cuts a text to {@link #MAX_TEXT} characters.
   *
   * @param text the text, may be {@code null}
   * @return the text, or its start followed by how much was cut
   */
  public static @Nullable String cut(@Nullable String text) {
    return cut(text, MAX_TEXT);
  }

  /**
   * Cuts an id to {@link #MAX_ID} characters.
   *
   * @param id the id, may be {@code null}
   * @return the id, or its start followed by how much was cut
   */
  public static @Nullable String cutId(@Nullable String id) {
    return cut(id, MAX_ID);
  }

  /**
   * An id for a log line or an exception message.
   *
   * @param id the id, may be {@code null}
   * @return the id cut to {@link #MAX_ID} characters, or {@code "<none>"} for {@code null}
   */
  public static String id(@Nullable String id) {
    return id == null ? "<none>" : Objects.requireNonNull(cutId(id));
  }

  /**
   * An error as {@code class: message} for a log line.
   *
   * @param error the error, may be {@code null}
   * @return its {@code toString()} cut to {@link #MAX_TEXT} characters; {@code null} for
   *     {@code null}; the class name and what went wrong when its {@code toString()} throws
   */
  public static @Nullable String error(@Nullable Throwable error) {
    if (error == null) {
      return null;
    }
    String text;
    try {
      text = error.toString();
    } catch (RuntimeException e) {
      text = error.getClass().getName() + " (its toString() failed: " + e.getClass().getName() + ")";
    }
    return cut(text);
  }

  /**
   * Any object (a user's extractor, say) for a log line.
   *
   * @param value the object, may be {@code null}
   * @return its {@code toString()} cut to {@link #MAX_TEXT} characters; its class name when its
   *     {@code toString()} throws
   */
  public static String describe(@Nullable Object value) {
    String text;
    try {
      text = String.valueOf(value);
    } catch (RuntimeException e) {
      text = Objects.requireNonNull(value).getClass().getName();
    }
    return Objects.requireNonNull(cut(text));
  }

  private static @Nullable String cut(@Nullable String text, int max) {
    if (text == null || text.length() <= max) {
      return text;
    }
    int end = Character.isHighSurrogate(text.charAt(max - 1)) ? max - 1 : max;
    return text.substring(0, end) + "...(" + (text.length() - end) + " more characters)";
  }
}
