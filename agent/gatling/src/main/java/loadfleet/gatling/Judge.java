package loadfleet.gatling;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gatling.javaapi.core.Session;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A journey request's extractions and checks, compiled once per job, judging each response as the
 * engine does (agent/engine/src/inspect.rs): the extractions in order (a value into the user's
 * variables; nothing found: the default value, a failed "extract VAR" check and {@code on_missing}),
 * then the checks in order (each counted, a failure sampled under its name with the first
 * condition that failed, then its {@code on_fail}), then the implicit status check (200-399) when
 * no check names statuses. What the user does next is the strongest rule of its failures.
 *
 * <p>Gatling's own check DSL is not used: its KO carries no name of ours, stops at the first
 * failing check, and could not count every check per response. Cookies stay Gatling's (its jar
 * per user); a cookie extraction reads the response's Set-Cookie itself, as the engine does.
 */
final class Judge {
  /** What the user does next; ordered weakest first (the strongest of the failures wins). */
  enum Then { CONTINUE, RESTART, STOP }

  /** A response as judged: status, header lines, body (a byte string) and latency. */
  record Seen(int status, List<Map.Entry<String, String>> headers, String body, long latencyUs) {
    String header(String name) {
      for (Map.Entry<String, String> h : headers) {
        if (h.getKey().equalsIgnoreCase(name)) {
          return h.getValue();
        }
      }
      return null;
    }
  }

  /** One check's outcome: its name and, when it failed, why (null: passed). */
  record Count(String name, String failure) {}

  /**
   * The judgement of a response: the variables it sets, every declared check's outcome (the
   * checks, then the extractions, as the engine counts them), whether the response failed a check
   * (the implicit one included) and what its user does next.
   */
  record Verdict(Map<String, String> values, List<Count> counts, boolean failed, Then then) {}

  private static final ObjectMapper JSON = new ObjectMapper();
  private final List<JourneyCheck> checks;
  private final List<Extraction> extractions;
  private final boolean implicitStatus;
  private final int maxBodyBytes;

  /** {@code maxBodyBytes}: the most of a body judged (JobSpec.max_body_bytes), as the engine keeps. */
  Judge(List<JourneyCheck> checks, List<Extraction> extractions, int maxBodyBytes) {
    this.maxBodyBytes = maxBodyBytes;
    this.checks = checks;
    this.extractions = extractions;
    this.implicitStatus = checks.stream().noneMatch(JourneyCheck::namesStatus);
  }

  /** Whether the request has anything to judge beyond the implicit status check. */
  boolean declares() {
    return !checks.isEmpty() || !extractions.isEmpty();
  }

  int maxBodyBytes() {
    return maxBodyBytes;
  }

  Verdict judge(Seen seen, Session session, long firstUser) {
    Map<String, String> values = new LinkedHashMap<>();
    List<Count> counts = new ArrayList<>();
    List<Count> extracted = new ArrayList<>();
    boolean failed = false;
    Then then = Then.CONTINUE;
    Parsed parsed = new Parsed(seen.body());
    for (Extraction e : extractions) {
      String why = e.missing(seen, parsed);
      values.put(e.variable(), why == null ? e.value(seen, parsed) : e.defaultValue());
      extracted.add(new Count(e.name(), why));
      if (why != null) {
        failed = true;
        then = max(then, e.onMissing());
      }
    }
    // Checks read the variables this response just set (the engine extracts first).
    Session withValues = session;
    for (Map.Entry<String, String> v : values.entrySet()) {
      withValues = withValues.set(Template.attribute(v.getKey()), v.getValue());
    }
    for (JourneyCheck c : checks) {
      String why = c.failure(seen, parsed, withValues, firstUser);
      counts.add(new Count(c.name(), why));
      if (why != null) {
        failed = true;
        then = max(then, c.onFail());
      }
    }
    counts.addAll(extracted);
    if (implicitStatus && (seen.status() < 200 || seen.status() > 399)) {
      failed = true;
    }
    return new Verdict(values, counts, failed, then);
  }

  /** A job's OnFail enum name as a Then (unspecified: continue). */
  static Then thenOf(String onFail) {
    return switch (onFail) {
      case "ON_FAIL_RESTART" -> Then.RESTART;
      case "ON_FAIL_STOP" -> Then.STOP;
      default -> Then.CONTINUE;
    };
  }

  private static Then max(Then a, Then b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  /** The body parsed as JSON once per response, when a JSON extraction or check asks. */
  static final class Parsed {
    private final String body;
    private JsonNode json;
    private boolean tried;

    Parsed(String body) {
      this.body = body;
    }

    /** The body's JSON; null when it is not JSON. */
    JsonNode json() {
      if (!tried) {
        tried = true;
        try {
          json = JSON.readTree(body.getBytes(StandardCharsets.ISO_8859_1));
        } catch (IOException e) {
          json = null;
        }
      }
      return json;
    }
  }

  /**
   * A JSON value's text as the engine writes it (a string its characters, other values their
   * compact text, as a UTF-8 byte string); null for JSON null or nothing.
   */
  static String jsonText(JsonNode node) {
    if (node == null || node.isMissingNode() || node.isNull()) {
      return null;
    }
    return Template.bytesOf(node.isTextual() ? node.asText() : node.toString());
  }
}
