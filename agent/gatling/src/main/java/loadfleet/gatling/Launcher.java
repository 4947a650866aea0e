package loadfleet.gatling;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The agent's entry point: runs Gatling with the given arguments and always ends the JVM with
 * Gatling's status. Gatling's own main can leave the JVM running (non-daemon threads) after a
 * failure, which the agent would see as a hang; here any failure becomes a {@code failed} event
 * on stdout and exit status 1.
 */
public final class Launcher {
  private Launcher() {}

  public static void main(String[] args) {
    int status;
    try {
      status = io.gatling.app.Gatling$.MODULE$.fromArgs(args);
    } catch (Throwable e) {
      Throwable cause = e;
      while (cause.getCause() != null && cause.getCause() != cause) {
        cause = cause.getCause();
      }
      ObjectNode event = JsonNodeFactory.instance.objectNode();
      event.putObject("failed").put("message", "Gatling failed: " + cause);
      System.out.println(LoadfleetStats.PREFIX + event);
      System.out.flush();
      e.printStackTrace();
      status = 1;
    }
    System.exit(status);
  }
}
