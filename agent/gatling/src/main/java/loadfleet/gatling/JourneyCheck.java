package loadfleet.gatling;

import com.fasterxml.jackson.databind.JsonNode;
import io.gatling.javaapi.core.Session;
import io.gatling.jsonpath.JsonPath;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.regex.Pattern;

/**
 * A named check of a journey request (a JobSpec Check): every condition set must hold, tested in
 * the proto's order (status, body_contains, body_lacks, body_regex, header, json_path,
 * latency_below_ms); the first that fails is described as agent/engine/src/checks.rs describes it
 * ("status 403 not in [200]", "body lacks 'csrf'"), in at most MAX_DESCRIPTION_CHARS.
 */
final class JourneyCheck {
  // As checks.rs: a description and a quoted value are cut at these lengths.
  static final int MAX_DESCRIPTION_CHARS = 200;
  static final int MAX_QUOTED_CHARS = 60;

  /** One condition: null when it holds on the response, else what failed. */
  private interface Condition {
    String failure(Judge.Seen seen, Judge.Parsed parsed, Session session, long firstUser);
  }

  private final String name;
  private final Judge.Then onFail;
  private final boolean namesStatus;
  private final List<Condition> conditions = new ArrayList<>();

  /** From the job's Check {@code c} of {@code field} ("requests[0].checks[1]"). */
  JourneyCheck(JsonNode c, List<String> variables, String field) {
    name = c.path("name").asText("");
    onFail = Judge.thenOf(c.path("on_fail").asText(""));
    namesStatus = !c.path("status").isEmpty();
    if (namesStatus) {
      conditions.add(status(c.get("status"), field + ".status"));
    }
    body(c, "body_contains", variables, field, true);
    body(c, "body_lacks", variables, field, false);
    if (!c.path("body_regex").asText("").isEmpty()) {
      String text = Template.bytesOf(c.get("body_regex").asText());
      Pattern regex = Pattern.compile(text);
      conditions.add((s, p, session, u) -> regex.matcher(s.body()).find() ? null
          : "body does not match " + quoted(text));
    }
    if (c.has("header")) {
      conditions.add(header(c.get("header")));
    }
    if (c.has("json_path")) {
      conditions.add(json(c.get("json_path"), field + ".json_path"));
    }
    long belowMs = c.path("latency_below_ms").asLong(0);
    if (belowMs > 0) {
      conditions.add((s, p, session, u) -> s.latencyUs() < belowMs * 1000 ? null
          : String.format("latency %.1f ms not below %d ms", s.latencyUs() / 1000.0, belowMs));
    }
  }

  String name() {
    return name;
  }

  Judge.Then onFail() {
    return onFail;
  }

  boolean namesStatus() {
    return namesStatus;
  }

  /** Null when every condition holds, else the first failure's description. */
  String failure(Judge.Seen seen, Judge.Parsed parsed, Session session, long firstUser) {
    for (Condition condition : conditions) {
      String why = condition.failure(seen, parsed, session, firstUser);
      if (why != null) {
        return bounded(why);
      }
    }
    return null;
  }

  private static Condition status(JsonNode items, String field) {
    BitSet codes = new BitSet(600);
    List<String> texts = new ArrayList<>();
    for (JsonNode item : items) {
      String text = item.asText();
      int[] range = statusRange(text);
      if (range.length == 0) {
        throw new IllegalArgumentException(field + ": '" + text + "' is no code in 100..=599, class like '2xx' "
            + "or range like '200-299'");
      }
      codes.set(range[0], range[1] + 1);
      texts.add(text);
    }
    String shown = "[" + String.join(", ", texts) + "]";
    return (s, p, session, u) -> codes.get(s.status()) ? null : "status " + s.status() + " not in " + shown;
  }

  /** {low, high} of a code, class or range; empty when it is none (checks.rs status_range). */
  static int[] statusRange(String item) {
    try {
      int low;
      int high;
      if (item.endsWith("xx") || item.endsWith("XX")) {
        low = Integer.parseInt(item.substring(0, item.length() - 2).strip() + "00");
        high = low + 99;
      } else if (item.contains("-")) {
        String[] parts = item.split("-", 2);
        low = Integer.parseInt(parts[0].strip());
        high = Integer.parseInt(parts[1].strip());
      } else {
        low = high = Integer.parseInt(item.strip());
      }
      boolean valid = low >= 100 && high <= 599 && low <= high;
      return valid ? new int[] {low, high} : new int[0];
    } catch (NumberFormatException e) {
      return new int[0];
    }
  }

  private void body(JsonNode c, String key, List<String> variables, String field, boolean contains) {
    String text = c.path(key).asText("");
    if (text.isEmpty()) {
      return;
    }
    Template template = Template.ofUtf8(text, variables, field + "." + key);
    conditions.add((s, p, session, firstUser) -> {
      String part = template.render(session, firstUser);
      boolean found = s.body().contains(part);
      if (found == contains) {
        return null;
      }
      return (contains ? "body lacks " : "body contains ") + quoted(part);
    });
  }

  private static Condition header(JsonNode h) {
    String header = h.path("name").asText();
    String equals = h.has("equals") ? Template.bytesOf(h.get("equals").asText()) : null;
    String contains = h.has("contains") ? Template.bytesOf(h.get("contains").asText()) : null;
    Pattern regex = h.has("regex") ? Pattern.compile(Template.bytesOf(h.get("regex").asText())) : null;
    return (s, p, session, u) -> {
      String value = s.header(header);
      if (value == null) {
        return h.path("absent").asBoolean(false) ? null : "header " + header + " absent";
      }
      String is = "header " + header + " is " + quoted(value);
      if (equals != null) {
        return value.equals(equals) ? null : is + ", not " + quoted(equals);
      }
      if (contains != null) {
        return value.contains(contains) ? null : is + ", lacks " + quoted(contains);
      }
      if (regex != null) {
        return regex.matcher(value).find() ? null : is + ", does not match " + quoted(regex.pattern());
      }
      return "header " + header + " present: " + quoted(value);
    };
  }

  private static Condition json(JsonNode j, String field) {
    String text = j.path("path").asText();
    JsonPath path = Extraction.compilePath(text, field + ".path");
    String equals = j.has("equals") ? Template.bytesOf(j.get("equals").asText()) : null;
    return (s, parsed, session, u) -> {
      JsonNode document = parsed.json();
      if (document == null) {
        return "json " + text + ": body is not JSON";
      }
      var nodes = path.query(document);
      if (!nodes.hasNext()) {
        return "json " + text + ": no value";
      }
      if (equals == null) {
        return null;
      }
      String first = Judge.jsonText(nodes.next());
      if (first == null) {
        return "json " + text + " is null, not " + quoted(equals);
      }
      return first.equals(equals) ? null : "json " + text + " is " + quoted(first) + ", not " + quoted(equals);
    };
  }

  /** A byte string quoted as checks.rs quotes it: in '', cut at MAX_QUOTED_CHARS with "…". */
  static String quoted(String byteString) {
    String text = byteString.length() > MAX_QUOTED_CHARS ? byteString.substring(0, MAX_QUOTED_CHARS) : byteString;
    String shown = new String(text.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8).replace("\ufffd", "");
    return "'" + shown + (byteString.length() > MAX_QUOTED_CHARS ? "…" : "") + "'";
  }

  private static String bounded(String description) {
    return description.length() > MAX_DESCRIPTION_CHARS
        ? description.substring(0, MAX_DESCRIPTION_CHARS - 1) + "…" : description;
  }
}
