package dev.idem.rabbit.internal;

/**
 * Bounds what the adapter puts into log lines and exception messages: message ids and error
 * texts come from producers and user code and can be arbitrarily long (an AMQP header holds up to
 * a frame's worth of text), so every one is cut before it reaches a log line.
 */
public final class LogText {

  /** The most characters of an id kept: {@value}, then {@value #ELLIPSIS}. */
  public static final int MAX_ID = 255;
  /** The most characters of an error text kept: {@value}, then {@value #ELLIPSIS}. */
  public static final int MAX_TEXT = 1_000;
  /** Appended to a text that was cut. */
  public static final String ELLIPSIS = "...";

  private LogText() {}

  /**
   * An id for a log line.
   *
   * @param id the id, may be {@code null}
   * @return the id, cut to {@value #MAX_ID} characters plus {@value #ELLIPSIS}; {@code "<none>"}
   *     for {@code null}
   */
  public static String id(String id) {
    return id == null ? "<none>" : cut(id, MAX_ID);
  }

  /**
   * A text (an error message, a broker's close reason) for a log line.
   *
   * @param text the text, may be {@code null}
   * @return the text, cut to {@value #MAX_TEXT} characters plus {@value #ELLIPSIS}
   */
  public static String text(String text) {
    return text == null ? null : cut(text, MAX_TEXT);
  }

  /**
   * An error as {@code class: message} for a log line. Never throws, even for an error whose
   * {@code toString()} does.
   *
   * @param error the error, may be {@code null}
   * @return its {@code toString()}, cut to {@value #MAX_TEXT} characters plus {@value #ELLIPSIS}
   */
  public static String error(Throwable error) {
    if (error == null) {
      return null;
    }
    String text;
    try {
      text = error.toString();
    } catch (RuntimeException e) {
      text = error.getClass().getName() + " (its toString() failed: " + e.getClass().getName() + ")";
    }
    return cut(text, MAX_TEXT);
  }

  /**
   * An object (a user's extractor, say) for a log line. Never throws, even when its
   * {@code toString()} does.
   *
   * @param value the object, may be {@code null}
   * @return its {@code toString()} cut to {@value #MAX_TEXT} characters plus {@value #ELLIPSIS}
   */
  public static String describe(Object value) {
    String text;
    try {
      text = String.valueOf(value);
    } catch (RuntimeException e) {
      text = value.getClass().getName();
    }
    return cut(text, MAX_TEXT);
  }

  /**
   * Cuts a text.
   *
   * @param text the text, not {@code null}
   * @param max the most characters kept
   * @return the text itself when it is short enough, otherwise its first {@code max} characters
   *     (never splitting a surrogate pair) and {@value #ELLIPSIS}
   */
  public static String cut(String text, int max) {
    if (text.length() <= max) {
      return text;
    }
    int end = Character.isHighSurrogate(text.charAt(max - 1)) ? max - 1 : max;
    return text.substring(0, end) + ELLIPSIS;
  }
}
