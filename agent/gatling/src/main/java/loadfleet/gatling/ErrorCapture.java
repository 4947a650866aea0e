package loadfleet.gatling;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.LoggerFactory;

/**
 * Why a request failed. Gatling's Java API does not give a failed request's error to the
 * simulation; Gatling logs it at DEBUG on {@code io.gatling.http.engine.response} ("Request 'x'
 * failed for user N: message"). This appender keeps the last such message per user, and the hook
 * takes it in the action that follows the request (the same user, so nothing can interleave).
 *
 * <p>The levels must be set before Gatling's HTTP classes load (Gatling reads them once): the
 * package at TRACE (which only keeps Gatling from building a DEBUG dump of every KO), its stats
 * processor at DEBUG (the failure lines). The launcher's logback configuration
 * ({@code loadfleet-logback.xml}) sets them; {@link #install()} does it too for simulations
 * started some other way, best effort.
 */
public final class ErrorCapture extends AppenderBase<ILoggingEvent> {
  static final String LOGGER = "io.gatling.http.engine.response";
  static final String STATS_LOGGER = LOGGER + ".DefaultStatsProcessor";
  private static final Pattern FAILED = Pattern.compile("failed for user (\\d+): (.*)", Pattern.DOTALL);
  private static final ConcurrentHashMap<Long, String> LAST_ERROR = new ConcurrentHashMap<>();
  private static final int MAX_MESSAGE_CHARS = 300;

  static void install() {
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext context)) {
      return;
    }
    Logger logger = context.getLogger(LOGGER);
    boolean present = false;
    for (var it = logger.iteratorForAppenders(); it.hasNext(); ) {
      present |= it.next() instanceof ErrorCapture;
    }
    if (!present) {
      ErrorCapture appender = new ErrorCapture();
      appender.setContext(context);
      appender.start();
      logger.addAppender(appender);
      logger.setLevel(Level.TRACE);
      logger.setAdditive(false);
      context.getLogger(STATS_LOGGER).setLevel(Level.DEBUG);
    }
  }

  @Override
  protected void append(ILoggingEvent event) {
    if (event.getLevel() != Level.DEBUG) {
      return;
    }
    Matcher m = FAILED.matcher(event.getFormattedMessage());
    if (m.find()) {
      String message = m.group(2).strip();
      int eol = message.indexOf('\n');
      message = eol >= 0 ? message.substring(0, eol) : message;
      LAST_ERROR.put(Long.parseLong(m.group(1)), message.length() > MAX_MESSAGE_CHARS
          ? message.substring(0, MAX_MESSAGE_CHARS) : message);
    }
  }

  /** The last failure message logged for this user (and forgets it); "" if none was seen. */
  static String take(long userId) {
    String message = LAST_ERROR.remove(userId);
    return message == null ? "" : message;
  }

  /** The loadfleet error kind of a Gatling failure message (netty and JDK exception texts). */
  static IntervalRecorder.ErrorKind classify(String message) {
    String m = message.toLowerCase(Locale.ROOT);
    // The generator's own limits first: such a request never reached the target.
    if (m.contains("cannot assign requested address")) {
      return IntervalRecorder.ErrorKind.LOCAL_PORTS;
    }
    if (m.contains("too many open files")) {
      return IntervalRecorder.ErrorKind.LOCAL_FDS;
    }
    if (m.contains("connection refused")) {
      return IntervalRecorder.ErrorKind.CONNECT_REFUSED;
    }
    if (m.contains("connecttimeout") || m.contains("connect timed out") || m.contains("connection timed out")) {
      return IntervalRecorder.ErrorKind.CONNECT_TIMEOUT;
    }
    if (m.contains("requesttimeout") || m.contains("request timeout") || m.contains("read timed out")) {
      return IntervalRecorder.ErrorKind.TIMEOUT;
    }
    if (m.contains("ssl") || m.contains("tls") || m.contains("handshake") || m.contains("certificate")) {
      return IntervalRecorder.ErrorKind.TLS;
    }
    if (m.contains("connection reset") || m.contains("premature") || m.contains("closedchannel")
        || m.contains("broken pipe") || m.contains("remotely closed")) {
      return IntervalRecorder.ErrorKind.RESET;
    }
    if (m.contains("decoder") || m.contains("toolong") || m.contains("invalid http") || m.contains("codec")) {
      return IntervalRecorder.ErrorKind.PROTOCOL;
    }
    return IntervalRecorder.ErrorKind.OTHER;
  }
}
