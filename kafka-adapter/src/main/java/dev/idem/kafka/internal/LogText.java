package dev.idem.kafka.internal;

/**
 * Cuts what the adapter puts into log lines and dead-letter headers, so that a huge error text
 * or message id cannot flood the logs or make a dead letter too large for its topic.
 */
public final class LogText {

  /** Longest error text or detail, in characters, {@code "..."} included: {@value}. */
  public static final int MAX_TEXT = 1000;
  /** Characters of a message id kept before {@code "..."}: {@value}, core's default maximum id length. */
  public static final int MAX_ID = 255;

  private LogText() {}

  /**
   * A text cut to {@link #MAX_TEXT} characters.
   *
   * @param text any text, or {@code null}
   * @return the text, or its first characters and {@code "..."}; {@code "null"} for {@code null}
   */
  public static String text(String text) {
    if (text == null) {
      return "null";
    }
    return text.length() <= MAX_TEXT ? text : cut(text, MAX_TEXT - 3) + "...";
  }

  /**
   * An error's {@code toString()} (class and message) cut to {@link #MAX_TEXT} characters.
   *
   * @param error the error, or {@code null}
   * @return the cut text
   */
  public static String error(Throwable error) {
    return text(String.valueOf(error));
  }

  /**
   * A message id cut to {@link #MAX_ID} characters and {@code "..."}.
   *
   * @param id the id, or {@code null}
   * @return the cut id; {@code "null"} for {@code null}
   */
  public static String id(String id) {
    if (id == null) {
      return "null";
    }
    return id.length() <= MAX_ID ? id : cut(id, MAX_ID) + "...";
  }

  /** The first {@code length} characters, one fewer when that would split a surrogate pair. */
  private static String cut(String text, int length) {
    int end = Character.isHighSurrogate(text.charAt(length - 1)) ? length - 1 : length;
    return text.substring(0, end);
  }
}
