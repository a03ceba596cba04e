package dev.idem.failover;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.slf4j.LoggerFactory;

/** Collects a logger's WARN events while open: what an operator sees during a switch. Thread-safe. */
final class LogCapture extends AppenderBase<ILoggingEvent> implements AutoCloseable {

  private final Logger logger;
  private final ConcurrentLinkedQueue<ILoggingEvent> events = new ConcurrentLinkedQueue<>();

  private LogCapture(String loggerName) {
    this.logger = (Logger) LoggerFactory.getLogger(loggerName);
  }

  static LogCapture of(Class<?> loggerClass) {
    LogCapture capture = new LogCapture(loggerClass.getName());
    capture.setContext(capture.logger.getLoggerContext());
    capture.start();
    capture.logger.addAppender(capture);
    return capture;
  }

  @Override
  protected void append(ILoggingEvent event) {
    events.add(event);
  }

  /** The formatted WARN messages that contain every one of {@code parts}. */
  List<String> warnings(String... parts) {
    return events.stream().filter(e -> e.getLevel() == Level.WARN).map(ILoggingEvent::getFormattedMessage)
        .filter(m -> List.of(parts).stream().allMatch(m::contains)).toList();
  }

  @Override
  public void close() {
    logger.detachAppender(this);
    stop();
  }
}
