package dev.idem.internal;

/** Keeps log lines bounded: exception texts and ids are cut as dead-letter headers are. */
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
  public static String cut(String text) {
    return cut(text, MAX_TEXT);
  }

  /**
   * Cuts an id to {@link #MAX_ID} characters.
   *
   * @param id the id, may be {@code null}
   * @return the id, or its start followed by how much was cut
   */
  public static String cutId(String id) {
    return cut(id, MAX_ID);
  }

  private static String cut(String text, int max) {
    if (text == null || text.length() <= max) {
      return text;
    }
    int end = Character.isHighSurrogate(text.charAt(max - 1)) ? max - 1 : max;
    return text.substring(0, end) + "...(" + (text.length() - end) + " more characters)";
  }
}
