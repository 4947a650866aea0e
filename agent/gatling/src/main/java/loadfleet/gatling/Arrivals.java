package loadfleet.gatling;

import java.util.concurrent.ThreadLocalRandom;

/**
 * Due times of an open model's requests, wall-clock milliseconds: evenly spaced at the rate, or
 * Poisson (exponential gaps), from the barrier on. Thread-safe: each call hands out the next one.
 */
final class Arrivals {
  private final double gapMs;
  private final boolean poisson;
  private double nextMs;

  Arrivals(long startAtMs, double ratePerS, boolean poisson) {
    this.gapMs = ratePerS > 0 ? 1000.0 / ratePerS : Double.POSITIVE_INFINITY;
    this.poisson = poisson;
    this.nextMs = startAtMs;
  }

  /**
   * Load begins no earlier than {@code ms} (the JVM started after the barrier): requests that
   * fell due while Gatling was starting are not sent, rather than sent at once and counted late.
   */
  synchronized void notBefore(long ms) {
    nextMs = Math.max(nextMs, ms);
  }

  synchronized long next() {
    long due = Math.round(nextMs);
    nextMs += poisson ? -gapMs * Math.log(1 - ThreadLocalRandom.current().nextDouble()) : gapMs;
    return due;
  }
}
