package dev.idem.kafka.testing;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Predicate;
import org.slf4j.LoggerFactory;

/**
 * Collects the events of a logger (and its children) while open, for tests that assert what an
 * operator would see. Thread-safe: the adapter logs from Kafka and Reactor threads.
 */
public final class LogCapture extends AppenderBase<ILoggingEvent> implements AutoCloseable {

  private final Logger logger;
  private final ConcurrentLinkedQueue<ILoggingEvent> events = new ConcurrentLinkedQueue<>();

  private LogCapture(String loggerName) {
    this.logger = (Logger) LoggerFactory.getLogger(loggerName);
  }

  /**
   * Starts capturing.
   *
   * @param loggerName the logger, for example {@code dev.idem.kafka}
   * @return the capture; close it to detach
   */
  public static LogCapture of(String loggerName) {
    LogCapture capture = new LogCapture(loggerName);
    capture.setContext(capture.logger.getLoggerContext());
    capture.start();
    capture.logger.addAppender(capture);
    return capture;
  }

  @Override
  protected void append(ILoggingEvent event) {
    events.add(event);
  }

  /**
   * The formatted messages of the captured events at a level that match a predicate.
   *
   * @param level the level
   * @param filter which messages
   * @return the messages, in logging order
   */
  public List<String> messages(Level level, Predicate<String> filter) {
    return events.stream().filter(e -> e.getLevel() == level).map(ILoggingEvent::getFormattedMessage).filter(filter).toList();
  }

  /**
   * The formatted messages of every captured event.
   *
   * @return the messages, in logging order
   */
  public List<String> messages() {
    return events.stream().map(ILoggingEvent::getFormattedMessage).toList();
  }

  @Override
  public void close() {
    logger.detachAppender(this);
    stop();
  }
}
