package loadfleet.gatling;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * The agent's entry point: runs Gatling with the given arguments and always ends the JVM with
 * Gatling's status. Gatling's own main can leave the JVM running (non-daemon threads) after a
 * failure, which the agent would see as a hang; here any failure becomes a {@code failed} event
 * on stdout and exit status 1.
 *
 * <p>With {@code -Dloadfleet.stdin_control=true} it reads the agent's commands from stdin, for any
 * simulation, with or without the hook: {@code stop} ends load (gracefully through the hook when
 * the simulation uses it; at once otherwise, as Gatling has no graceful stop from outside); end
 * of stdin means the agent is gone and the JVM halts at once, so no load outlives its agent.
 */
public final class Launcher {
  private Launcher() {}

  public static void main(String[] args) {
    if (Boolean.getBoolean("loadfleet.stdin_control")) {
      Thread control = new Thread(Launcher::readCommands, "loadfleet-control");
      control.setDaemon(true);
      control.start();
    }
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

  private static void readCommands() {
    try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.trim().equals("stop")) {
          LoadfleetStats hook = LoadfleetStats.active();
          if (hook != null) {
            hook.stopGracefully();
          }
          System.out.flush();
          Runtime.getRuntime().halt(0);
        }
      }
    } catch (IOException | RuntimeException e) {
      // fall through: the agent is gone either way
    }
    System.err.println("loadfleet: stdin closed (agent gone): stopping at once");
    Runtime.getRuntime().halt(3);
  }
}
