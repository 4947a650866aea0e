package loadfleet.gatling;

/**
 * A response Gatling marked KO (a check failed: the user's own, Gatling's default status check
 * or JobSimulation's 200-399): the failed check's name as Gatling builds it and what it found.
 * Travels as an error sample of kind ERROR_KIND_CHECK ({@code check}, {@code message}).
 *
 * <p>Gatling words a failed check "{@code <name>, <what it found>}" ({@code status.find.in([200,
 * 209], 304), found 404}; {@code substring(Welcome).find.exists, found nothing}), a check that
 * could not run "{@code <name> extraction crashed: <why>}". The name may itself hold ", " inside
 * brackets, so it ends at the first ", " outside them. Other texts (a response transformer that
 * crashed) have no name: all of it is the message.
 */
record CheckFailure(String check, String message) {
  /** A check's name is at most this long, as a plan's check names (wire/checks.py). */
  static final int MAX_CHECK_CHARS = 64;
  /** What a KO says when Gatling's reason was not captured (its logger not at DEBUG). */
  static final String NO_REASON = "Gatling marked the response KO";

  /** The check and its finding in Gatling's KO message ({@code ""}: none was captured). */
  static CheckFailure of(String koMessage) {
    if (koMessage.isEmpty()) {
      return new CheckFailure("", NO_REASON);
    }
    int end = nameEnd(koMessage);
    if (end < 0) {
      return new CheckFailure("", koMessage);
    }
    String check = koMessage.substring(0, Math.min(end, MAX_CHECK_CHARS));
    String rest = koMessage.substring(end).replaceFirst("^(, | )", "");
    return new CheckFailure(check, rest.isEmpty() ? koMessage : rest);
  }

  /** Where the check's name ends: the first ", " or " ... crashed:" outside brackets; -1: none. */
  private static int nameEnd(String text) {
    int depth = 0;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '(' || c == '[') {
        depth++;
      } else if ((c == ')' || c == ']') && depth > 0) {
        depth--;
      } else if (depth == 0 && (text.startsWith(", ", i) || (c == ' ' && crashedAt(text, i + 1)))) {
        return i;
      }
    }
    return -1;
  }

  // Gatling's words for a check that could not run ("... extraction crashed: ...").
  private static boolean crashedAt(String text, int at) {
    int colon = text.indexOf(" crashed: ", at);
    return colon > 0 && text.indexOf(' ', at) == colon;
  }
}
