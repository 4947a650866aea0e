package loadfleet.gatling;

import io.gatling.javaapi.core.Session;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A journey's template ({@code ${csrf}} in a path, a header value or a body), parsed once per job
 * with the engine's grammar (agent/engine/src/template.rs, tests/wire/template_cases.json) and
 * rendered per request from the user's Gatling session. Rendering is a session function, not
 * Gatling EL: EL has its own escapes ({@code #{}}) and no url-encoding, and a plan's literal text
 * must go out exactly as the engine sends it.
 *
 * <p>Texts are byte strings: each char holds one byte (ISO-8859-1), so a body's bytes and a value
 * taken from a response travel unchanged; {@link #ofUtf8} takes a text the job gives as Unicode.
 *
 * <p>Grammar: in a run of {@code $}s just before a {@code {}, each {@code $$} is a literal
 * {@code $} and an odd one left over opens a {@code ${}, which ends at the first {@code }}. A
 * reference is a built-in ({@code user agent iteration uuid now_ms random(low,high)}) or a variable
 * of the job, with an optional filter {@code :url} or {@code :json}. Data-set columns are not in
 * jobs yet: refused like an unknown variable.
 */
final class Template {
  /** Session attribute of variable {@code name} (a byte string). */
  static String attribute(String name) {
    return "loadfleet.var." + name;
  }

  /** Session attribute of the user's iteration (rounds of the session's steps completed). */
  static final String ITERATION = "loadfleet.iteration";
  // ${agent}: the job's agent_index, set on each user's session when it starts.
  static final String AGENT = "loadfleet.agent";
  // ${user}: the user's index in its population (from 0), set on each user's session when it
  // starts; without it (a session of no population) Gatling's userId, which counts from 1.
  static final String USER = "loadfleet.user";

  enum Filter { NONE, URL, JSON }

  enum Builtin { USER, AGENT, ITERATION, UUID, NOW_MS, RANDOM }

  /**
   * A template the engine would refuse: its kind as tests/wire/template_cases.json names it
   * (unterminated, empty, unknown_variable, unknown_data, unknown_filter, bad_random), the byte
   * offset of its {@code ${} and the name it refused.
   */
  static final class TemplateError extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;
    final String kind;
    final int offset;
    final String name;

    TemplateError(String field, String kind, int offset, String name, String why) {
      super(field + ": " + why + " at byte " + offset);
      this.kind = kind;
      this.offset = offset;
      this.name = name;
    }
  }

  /** A literal (text set) or a reference (variable or built-in), with its filter. */
  record Piece(String text, String variable, Builtin builtin, Filter filter, long low, long high) {}

  private final List<Piece> pieces;
  private final String literal;

  private Template(List<Piece> pieces) {
    this.pieces = pieces;
    this.literal = pieces.size() == 1 && pieces.get(0).text() != null ? pieces.get(0).text()
        : pieces.isEmpty() ? "" : null;
  }

  /** A Unicode text of the job (path, header value) as its UTF-8 byte string. */
  static String bytesOf(String text) {
    return new String(text.getBytes(StandardCharsets.UTF_8), StandardCharsets.ISO_8859_1);
  }

  /** A byte string back to Unicode (UTF-8). */
  static String utf8Of(String byteString) {
    return new String(byteString.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
  }

  static Template ofUtf8(String text, List<String> variables, String field) {
    return parse(bytesOf(text), variables, field);
  }

  /**
   * Parses {@code text} (a byte string); {@code variables} are the job's; {@code field} names the
   * text in an error ("requests[0].path").
   */
  static Template parse(String text, List<String> variables, String field) {
    List<Piece> pieces = new ArrayList<>();
    StringBuilder lit = new StringBuilder();
    int at = 0;
    while (at < text.length()) {
      char c = text.charAt(at);
      if (c != '$') {
        lit.append(c);
        at++;
        continue;
      }
      int run = at;
      while (run < text.length() && text.charAt(run) == '$') {
        run++;
      }
      int dollars = run - at;
      if (run >= text.length() || text.charAt(run) != '{') {
        lit.append("$".repeat(dollars));
        at = run;
        continue;
      }
      lit.append("$".repeat(dollars / 2));
      if (dollars % 2 == 0) {
        lit.append('{');
        at = run + 1;
        continue;
      }
      int open = run - 1;
      int close = text.indexOf('}', run);
      if (close < 0) {
        throw new TemplateError(field, "unterminated", open, "", "a template without its closing }");
      }
      if (lit.length() > 0) {
        pieces.add(new Piece(lit.toString(), null, null, Filter.NONE, 0, 0));
        lit.setLength(0);
      }
      pieces.add(reference(text.substring(run + 1, close), variables, field, open));
      at = close + 1;
    }
    if (lit.length() > 0) {
      pieces.add(new Piece(lit.toString(), null, null, Filter.NONE, 0, 0));
    }
    return new Template(pieces);
  }

  private static Piece reference(String inside, List<String> variables, String field, int at) {
    // The first `:` ends the name: `${csrf:url:json}` has the filter "url:json" (refused).
    int colon = inside.indexOf(':');
    String name = colon < 0 ? inside : inside.substring(0, colon);
    if (name.isEmpty()) {
      throw new TemplateError(field, "empty", at, "", "${" + inside + "} names nothing");
    }
    Filter filter = Filter.NONE;
    if (colon >= 0) {
      String f = inside.substring(colon + 1);
      filter = switch (f) {
        case "url" -> Filter.URL;
        case "json" -> Filter.JSON;
        default -> throw new TemplateError(field, "unknown_filter", at, f, "unknown filter " + f + " (url or json)");
      };
    }
    if (name.equals("random") || name.startsWith("random(")) {
      return random(name, filter, field, at);
    }
    for (Builtin b : Builtin.values()) {
      if (b != Builtin.RANDOM && b.name().toLowerCase(Locale.ROOT).equals(name)) {
        return new Piece(null, null, b, filter, 0, 0);
      }
    }
    int dot = name.indexOf('.');
    if (dot >= 0) {
      // Data sets (per-user rows) are not in jobs yet: every data set is unknown.
      String data = name.substring(0, dot);
      throw new TemplateError(field, "unknown_data", at, data, "${" + inside + "}: no data set " + data + " in the job");
    }
    if (!variables.contains(name)) {
      throw new TemplateError(field, "unknown_variable", at, name, "${" + inside + "}: " + name + " is no variable of the job");
    }
    return new Piece(null, name, null, filter, 0, 0);
  }

  /** {@code random(low,high)}: whole numbers of the u64 range, low <= high, blanks around them. */
  private static Piece random(String name, Filter filter, String field, int at) {
    TemplateError bad = new TemplateError(field, "bad_random", at, name, "${" + name + "}: random(low,high) wants "
        + "whole numbers from 0 to 2^64 - 1, low <= high");
    if (!name.startsWith("random(") || !name.endsWith(")")) {
      throw bad;
    }
    String[] bounds = name.substring(7, name.length() - 1).split(",", -1);
    if (bounds.length != 2) {
      throw bad;
    }
    try {
      long low = Long.parseUnsignedLong(bounds[0].strip());
      long high = Long.parseUnsignedLong(bounds[1].strip());
      if (Long.compareUnsigned(low, high) > 0) {
        throw bad;
      }
      return new Piece(null, null, Builtin.RANDOM, filter, low, high);
    } catch (NumberFormatException e) {
      throw bad;
    }
  }

  /** The pieces in order (literal text joined), for the shared case table's test. */
  List<Piece> pieces() {
    return pieces;
  }

  /** True when the text has no reference: it renders to the same text for every user. */
  boolean isStatic() {
    return literal != null;
  }

  /** The text for this user: a byte string. {@code firstUser} is the job's first_user. */
  String render(Session session, long firstUser) {
    if (literal != null) {
      return literal;
    }
    StringBuilder out = new StringBuilder();
    for (Piece p : pieces) {
      if (p.text() != null) {
        out.append(p.text());
      } else {
        append(out, value(p, session, firstUser), p.filter());
      }
    }
    return out.toString();
  }

  private static String value(Piece p, Session session, long firstUser) {
    if (p.variable() != null) {
      String v = session.getString(attribute(p.variable()));
      return v == null ? "" : v;
    }
    return switch (p.builtin()) {
      // The fleet-wide index: first_user plus the user's index in its population (Gatling's
      // userId counts across every population of the JVM).
      case USER -> Long.toUnsignedString(firstUser + (session.contains(USER) ? session.getLong(USER) : session.userId() - 1));
      // As the engine: every driver of an agent renders the job's agent_index.
      case AGENT -> String.valueOf(session.contains(AGENT) ? session.getLong(AGENT) : 0);
      case ITERATION -> String.valueOf(session.contains(ITERATION) ? session.getLong(ITERATION) : 0);
      case UUID -> UUID.randomUUID().toString();
      case NOW_MS -> String.valueOf(System.currentTimeMillis());
      case RANDOM -> Long.toUnsignedString(random(p.low(), p.high()));
    };
  }

  private static long random(long low, long high) {
    long span = high - low;
    if (span == -1L) {
      return ThreadLocalRandom.current().nextLong();
    }
    return low + (span >= 0 ? ThreadLocalRandom.current().nextLong(span + 1)
        : Long.remainderUnsigned(ThreadLocalRandom.current().nextLong(), span + 1));
  }

  private static final String HEX = "0123456789ABCDEF";

  /** Appends a byte string through a filter, as agent/engine/src/encode.rs does. */
  static void append(StringBuilder out, String value, Filter filter) {
    for (int i = 0; i < value.length(); i++) {
      char b = value.charAt(i);
      if (filter == Filter.URL && !unreserved(b)) {
        out.append('%').append(HEX.charAt(b >> 4 & 0xf)).append(HEX.charAt(b & 0xf));
      } else if (filter == Filter.JSON && (b == '"' || b == '\\' || b < 0x20)) {
        out.append(jsonEscape(b));
      } else {
        out.append(b);
      }
    }
  }

  private static boolean unreserved(char b) {
    return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '-' || b == '.'
        || b == '_' || b == '~';
  }

  private static String jsonEscape(char b) {
    return switch (b) {
      case '"' -> "\\\"";
      case '\\' -> "\\\\";
      case '\n' -> "\\n";
      case '\r' -> "\\r";
      case '\t' -> "\\t";
      case 0x08 -> "\\b";
      case 0x0c -> "\\f";
      default -> String.format("\\u%04x", (int) b);
    };
  }
}
