package loadfleet.gatling;

import com.fasterxml.jackson.databind.JsonNode;
import io.gatling.jsonpath.JsonPath;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One extraction of a journey request (a JobSpec Extract), compiled once per job: the status, a
 * header (the first of the name), a cookie (the last Set-Cookie of the name), a regex's group 1
 * (the whole match without groups) at {@code occurrence}, a JSON pointer (RFC 6901), a JSONPath
 * node at {@code occurrence} (Gatling's JSONPath, on the subset the plan lets through for this
 * driver: dot, index, wildcard, {@code ..}) or a form field's value, as
 * agent/engine/src/extract.rs takes them. Values and texts are byte strings (Template).
 */
record Extraction(String name, String variable, Kind kind, String argument, Pattern regex, JsonPath path,
    int occurrence, Judge.Then onMissing, String defaultValue) {
  enum Kind { STATUS, HEADER, COOKIE, REGEX, JSON_POINTER, JSON_PATH, FORM_FIELD }

  static final String NOT_FOUND = "not found";
  static final String NOT_JSON = "body is not JSON";

  /** From the job's Extract {@code e} of {@code field} ("requests[0].extracts[1]"). */
  static Extraction of(JsonNode e, List<String> variables, String field) {
    int var = e.path("var").asInt(0);
    if (var >= variables.size()) {
      throw new IllegalArgumentException(field + ".var: " + var + " is no variable of the job");
    }
    String variable = variables.get(var);
    String name = e.path("name").asText("");
    name = name.isEmpty() ? "extract " + variable : name;
    Kind kind = null;
    String argument = "";
    for (Kind k : Kind.values()) {
      String key = k.name().toLowerCase(Locale.ROOT);
      if (e.has(key)) {
        kind = k;
        argument = Template.bytesOf(e.get(key).asText());
      }
    }
    if (kind == null) {
      throw new IllegalArgumentException(field + ": no source (status, header, cookie, regex, json_pointer, "
          + "json_path or form_field)");
    }
    Pattern regex = kind == Kind.REGEX ? Pattern.compile(argument) : null;
    JsonPath path = kind == Kind.JSON_PATH ? compilePath(Template.utf8Of(argument), field + ".json_path") : null;
    return new Extraction(name, variable, kind, argument, regex, path, e.path("occurrence").asInt(0),
        Judge.thenOf(e.path("on_missing").asText("")), Template.bytesOf(e.path("default_value").asText("")));
  }

  static JsonPath compilePath(String text, String field) {
    var compiled = JsonPath.compile(text);
    if (compiled.isLeft()) {
      throw new IllegalArgumentException(field + ": " + text + " is no JSONPath Gatling reads ("
          + compiled.swap().toOption().get().reason() + ")");
    }
    return compiled.toOption().get();
  }

  /** Why nothing was found (null: a value was). */
  String missing(Judge.Seen seen, Judge.Parsed parsed) {
    if ((kind == Kind.JSON_POINTER || kind == Kind.JSON_PATH) && parsed.json() == null) {
      return NOT_JSON;
    }
    return value(seen, parsed) == null ? NOT_FOUND : null;
  }

  /** The value found (a byte string), null when none. */
  String value(Judge.Seen seen, Judge.Parsed parsed) {
    return switch (kind) {
      case STATUS -> String.valueOf(seen.status());
      case HEADER -> seen.header(argument);
      case COOKIE -> cookie(seen.headers(), argument);
      case REGEX -> regex(seen.body());
      case JSON_POINTER -> parsed.json() == null ? null : Judge.jsonText(parsed.json().at(Template.utf8Of(argument)));
      case JSON_PATH -> parsed.json() == null ? null : nth(path.query(parsed.json()), occurrence);
      case FORM_FIELD -> FormField.value(seen.body(), argument);
    };
  }

  private String regex(String body) {
    Matcher m = regex.matcher(body);
    for (int i = 0; i <= occurrence; i++) {
      if (!m.find()) {
        return null;
      }
    }
    return m.groupCount() >= 1 ? m.group(1) : m.group();
  }

  /** The node at {@code n} of a JSONPath's result, as the engine writes it (null: none). */
  static String nth(scala.collection.Iterator<JsonNode> nodes, int n) {
    for (int i = 0; nodes.hasNext(); i++) {
      JsonNode node = nodes.next();
      if (i == n) {
        return Judge.jsonText(node);
      }
    }
    return null;
  }

  /** The value of the last Set-Cookie named {@code name} (the one a browser keeps). */
  static String cookie(List<Map.Entry<String, String>> headers, String name) {
    String found = null;
    for (Map.Entry<String, String> h : headers) {
      if (!h.getKey().equalsIgnoreCase("set-cookie")) {
        continue;
      }
      String pair = h.getValue().split(";", 2)[0];
      int eq = pair.indexOf('=');
      if (eq > 0 && pair.substring(0, eq).strip().equals(name)) {
        found = pair.substring(eq + 1).strip();
      }
    }
    return found;
  }
}
