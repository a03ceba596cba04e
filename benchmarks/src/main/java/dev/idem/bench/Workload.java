package dev.idem.bench;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * The payment events of a run, generated from a seed: {@code distinct} events with ids
 * {@code pay-0 .. pay-(distinct-1)}, random accounts {@code 1..accounts} and amounts of 1 to
 * 10,000 cents, published in id order, plus a fraction of producer duplicates (the same id and
 * payload published again, as a producer retry would) placed 1 to 2,000 positions after their
 * original. Knows the balance every account must end with: the sum of its distinct events.
 */
final class Workload {

  /** Furthest a duplicate lands after its original, in positions. */
  static final int DUPLICATE_WINDOW = 2_000;

  private final int distinct;
  private final int accounts;
  private final int[] account;
  private final long[] amount;
  private final int[] sequence;
  private final long[] expectedBalances;

  private Workload(int distinct, int accounts, int[] account, long[] amount, int[] sequence) {
    this.distinct = distinct;
    this.accounts = accounts;
    this.account = account;
    this.amount = amount;
    this.sequence = sequence;
    this.expectedBalances = new long[accounts + 1];
    for (int i = 0; i < distinct; i++) {
      expectedBalances[account[i]] += amount[i];
    }
  }

  /**
   * Generates a workload.
   *
   * @param distinct distinct events, at least 1
   * @param duplicateFraction producer duplicates as a fraction of {@code distinct}, 0 to 1
   * @param accounts accounts, at least 1
   * @param seed the random seed
   * @return the workload
   */
  static Workload generate(int distinct, double duplicateFraction, int accounts, long seed) {
    if (distinct < 1 || accounts < 1 || duplicateFraction < 0 || duplicateFraction > 1) {
      throw new IllegalArgumentException(
          "bad workload: " + distinct + " events, " + duplicateFraction + " duplicates, " + accounts + " accounts");
    }
    SplittableRandom random = new SplittableRandom(seed);
    int[] account = new int[distinct];
    long[] amount = new long[distinct];
    for (int i = 0; i < distinct; i++) {
      account[i] = 1 + random.nextInt(accounts);
      amount[i] = 1 + random.nextInt(10_000);
    }
    int duplicates = (int) Math.round(distinct * duplicateFraction);
    // Which events are repeated: the first `duplicates` of a shuffled index.
    int[] shuffled = new int[distinct];
    for (int i = 0; i < distinct; i++) {
      shuffled[i] = i;
    }
    for (int i = distinct - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      int t = shuffled[i];
      shuffled[i] = shuffled[j];
      shuffled[j] = t;
    }
    // Sort keys: an original at position p has key 2p, a duplicate landing after position q has 2q+1.
    long[] keyed = new long[distinct + duplicates];
    for (int i = 0; i < distinct; i++) {
      keyed[i] = ((long) i * 2) << 32 | i;
    }
    for (int d = 0; d < duplicates; d++) {
      int original = shuffled[d];
      long after = Math.min((long) original + random.nextInt(DUPLICATE_WINDOW), distinct - 1L);
      keyed[distinct + d] = (after * 2 + 1) << 32 | original;
    }
    Arrays.sort(keyed);
    int[] sequence = new int[keyed.length];
    for (int i = 0; i < keyed.length; i++) {
      sequence[i] = (int) keyed[i];
    }
    return new Workload(distinct, accounts, account, amount, sequence);
  }

  /** Distinct events (= effects and dedup rows expected). */
  int distinct() {
    return distinct;
  }

  /** Messages to publish, duplicates included. */
  int total() {
    return sequence.length;
  }

  /** Producer duplicates. */
  int duplicates() {
    return sequence.length - distinct;
  }

  int accounts() {
    return accounts;
  }

  /** The event published at a position, 0 to {@link #total()} - 1. */
  int eventAt(int position) {
    return sequence[position];
  }

  static String id(int event) {
    return "pay-" + event;
  }

  int account(int event) {
    return account[event];
  }

  long amount(int event) {
    return amount[event];
  }

  Payment payment(int event, long publishedNanos) {
    return new Payment(account[event], amount[event], publishedNanos);
  }

  /** The balance account {@code id} must end with. */
  long expectedBalance(int accountId) {
    return expectedBalances[accountId];
  }
}
