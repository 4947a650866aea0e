package loadfleet.gatling;

/**
 * The value attribute of the first {@code <input>} whose name attribute is the field's, as
 * agent/engine/src/extract.rs reads it: a scan of the tags, attributes in any order, values in
 * double, single or no quotes; an input with that name and no value has the empty value (HTML's
 * rule); HTML's entities for the characters a form value escapes are decoded.
 */
final class FormField {
  private static final String[][] ENTITIES = {
    {"&amp;", "&"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&#x27;", "'"}, {"&apos;", "'"}, {"&lt;", "<"}, {"&gt;", ">"},
  };

  private FormField() {}

  /** The field's value in {@code body} (byte strings), null when no input has that name. */
  static String value(String body, String field) {
    int at = 0;
    while (true) {
      int lt = body.indexOf('<', at);
      if (lt < 0) {
        return null;
      }
      int tag = lt + 1;
      boolean input = body.regionMatches(true, tag, "input", 0, 5) && tag + 5 < body.length()
          && (Character.isWhitespace(body.charAt(tag + 5)) || body.charAt(tag + 5) == '/' || body.charAt(tag + 5) == '>');
      if (!input) {
        at = tag;
        continue;
      }
      String[] found = new String[2];
      int end = attributes(body, tag + 5, found);
      if (field.equals(found[0])) {
        return decode(found[1] == null ? "" : found[1]);
      }
      at = Math.max(end, tag);
    }
  }

  /** Reads a tag's attributes from {@code at} to its {@code >}: name and value into {@code found}. */
  private static int attributes(String body, int at, String[] found) {
    while (true) {
      while (at < body.length() && (Character.isWhitespace(body.charAt(at)) || body.charAt(at) == '/')) {
        at++;
      }
      if (at >= body.length() || body.charAt(at) == '>') {
        return at;
      }
      int keyStart = at;
      while (at < body.length() && !Character.isWhitespace(body.charAt(at)) && "=>/".indexOf(body.charAt(at)) < 0) {
        at++;
      }
      String key = body.substring(keyStart, at);
      int[] next = {at};
      String value = attributeValue(body, at, next);
      at = Math.max(next[0], keyStart + 1);
      if (key.equalsIgnoreCase("name") && found[0] == null) {
        found[0] = value;
      } else if (key.equalsIgnoreCase("value") && found[1] == null) {
        found[1] = value;
      }
    }
  }

  private static int blanks(String body, int at) {
    while (at < body.length() && Character.isWhitespace(body.charAt(at))) {
      at++;
    }
    return at;
  }

  private static String attributeValue(String body, int at, int[] next) {
    int afterName = at;
    at = blanks(body, at);
    if (at >= body.length() || body.charAt(at) != '=') {
      next[0] = afterName;
      return "";
    }
    at = blanks(body, at + 1);
    if (at < body.length() && (body.charAt(at) == '"' || body.charAt(at) == '\'')) {
      int close = body.indexOf(body.charAt(at), at + 1);
      close = close < 0 ? body.length() : close;
      next[0] = Math.min(close + 1, body.length());
      return body.substring(at + 1, close);
    }
    int end = at;
    while (end < body.length() && !Character.isWhitespace(body.charAt(end)) && body.charAt(end) != '>') {
      end++;
    }
    next[0] = end;
    return body.substring(at, end);
  }

  private static String decode(String value) {
    StringBuilder out = new StringBuilder();
    int at = 0;
    outer:
    while (at < value.length()) {
      if (value.charAt(at) == '&') {
        for (String[] e : ENTITIES) {
          if (value.startsWith(e[0], at)) {
            out.append(e[1]);
            at += e[0].length();
            continue outer;
          }
        }
      }
      out.append(value.charAt(at++));
    }
    return out.toString();
  }
}
