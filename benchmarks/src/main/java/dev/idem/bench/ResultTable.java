package dev.idem.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The one table of a throughput run, as a Markdown table with aligned columns: each row's rate,
 * each Idem row's rate as a multiple of its broker's peers (the broker alone, the JDBC loop with a
 * transaction per message, the JDBC loop with a transaction per poll), the consumer's CPU per
 * 1,000 messages, and the check. When row 0 ran, a column gives each Idem row's rate over the
 * database alone; when rows ran on both Kafka engines, a column gives each native row's rate over
 * its Reactor Kafka twin ({@code 4b} over {@code 4b-rk}). A ratio column whose peer did not run is
 * left out. Idem rows also show their mean batch (messages per transaction) and transactions per
 * second, and on RabbitMQ the {@code basic.ack} frames they sent per 1,000 messages.
 */
final class ResultTable {

  private static final String[] HEADER = {"broker", "row", "msg/s", "x database", "x broker", "x JDBC tx/msg", "x JDBC tx/poll",
      "x Spring/record", "x Parallel Consumer", "x Spring/poll", "x R2DBC loop/msg",
      "x R2DBC loop set", "x Reactor Kafka",
      "mean batch", "tx/s", "ack frames/1k msg", "CPU s/1k msg", "broker CPU s/1k msg", "database CPU s/1k msg", "check"};
  private static final Set<String> LEFT_ALIGNED = Set.of("broker", "row", "check");
  /** Columns only some rows fill (Idem's batches), left out when none does. */
  private static final Set<String> OPTIONAL = Set.of("mean batch", "tx/s", "ack frames/1k msg", "broker CPU s/1k msg",
      "database CPU s/1k msg");

  private ResultTable() {}

  static String format(List<RowResult> rows) {
    List<String[]> cells = new ArrayList<>();
    cells.add(HEADER);
    for (RowResult row : rows) {
      boolean ratios = row.kind() == RowResult.Kind.IDEM;
      RowResult reactorKafka = rows.stream()
          .filter(r -> r.broker().equals(row.broker()) && r.id().equals(row.id() + ThroughputRows.REACTOR_KAFKA_SUFFIX))
          .findFirst().orElse(null);
      cells.add(new String[]{
          row.broker(),
          row.id() + " " + row.name(),
          row.ok() ? String.format(Locale.ROOT, "%,.0f", row.messagesPerSecond()) : "-",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.DATABASE)) : "",
          ratios || row.kind() == RowResult.Kind.ADAPTER ? ratio(row, peer(rows, row.broker(), RowResult.Kind.BROKER)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.JDBC_MESSAGE)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.JDBC_POLL)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.SPRING_RECORD)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.PARALLEL_CONSUMER)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.SPRING_POLL)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.R2DBC_MESSAGE)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.R2DBC_SET)) : "",
          reactorKafka != null ? ratio(row, reactorKafka) : "",
          row.ok() && row.meanBatch() > 0 ? String.format(Locale.ROOT, "%.1f", row.meanBatch()) : "",
          row.ok() && row.transactionsPerSecond() > 0 ? String.format(Locale.ROOT, "%,.0f", row.transactionsPerSecond()) : "",
          row.ok() && row.settleFramesPerThousand() >= 0 ? String.format(Locale.ROOT, "%.0f", row.settleFramesPerThousand()) : "",
          row.ok() ? String.format(Locale.ROOT, "%.3f", row.cpuSecondsPerThousand()) : "-",
          row.ok() && row.brokerCpuSecondsPerThousand() >= 0
              ? String.format(Locale.ROOT, "%.3f", row.brokerCpuSecondsPerThousand())
              : "",
          row.ok() && row.databaseCpuSecondsPerThousand() >= 0
              ? String.format(Locale.ROOT, "%.3f", row.databaseCpuSecondsPerThousand())
              : "",
          row.ok() ? "ok" : "FAILED: " + String.join("; ", row.failures())
      });
    }
    // A ratio column whose peer did not run (row 0, the Reactor Kafka twins) is left out.
    for (int column = HEADER.length - 1; column >= 0; column--) {
      int c = column;
      if ((HEADER[c].startsWith("x ") || OPTIONAL.contains(HEADER[c]))
          && cells.stream().skip(1).allMatch(line -> line[c].isEmpty() || line[c].equals("-"))) {
        cells.replaceAll(line -> without(line, c));
      }
    }
    String[] header = cells.get(0);
    int[] widths = new int[header.length];
    for (String[] line : cells) {
      for (int c = 0; c < line.length; c++) {
        widths[c] = Math.max(widths[c], line[c].length());
      }
    }
    StringBuilder out = new StringBuilder();
    for (int l = 0; l < cells.size(); l++) {
      appendLine(out, cells.get(l), widths, header);
      if (l == 0) {
        out.append('|');
        for (int c = 0; c < widths.length; c++) {
          out.append(
              !LEFT_ALIGNED.contains(header[c]) ? " " + "-".repeat(widths[c] - 1) + ": |" : " " + "-".repeat(widths[c]) + " |");
        }
        out.append('\n');
      }
    }
    return out.toString();
  }

  private static void appendLine(StringBuilder out, String[] line, int[] widths, String[] header) {
    out.append('|');
    for (int c = 0; c < line.length; c++) {
      String pad = " ".repeat(widths[c] - line[c].length());
      out.append(' ').append(!LEFT_ALIGNED.contains(header[c]) ? pad + line[c] : line[c] + pad).append(" |");
    }
    out.append('\n');
  }

  private static String[] without(String[] line, int column) {
    String[] out = new String[line.length - 1];
    System.arraycopy(line, 0, out, 0, column);
    System.arraycopy(line, column + 1, out, column, out.length - column);
    return out;
  }

  private static RowResult peer(List<RowResult> rows, String broker, RowResult.Kind kind) {
    return rows.stream().filter(r -> r.broker().equals(broker) && r.kind() == kind && r.ok()).findFirst().orElse(null);
  }

  /** {@code row}'s rate over {@code peer}'s, e.g. {@code 0.42}; "-" when either is missing. */
  static String ratio(RowResult row, RowResult peer) {
    if (peer == null || !row.ok() || peer.messagesPerSecond() <= 0) {
      return "-";
    }
    return String.format(Locale.ROOT, "%.2f", row.messagesPerSecond() / peer.messagesPerSecond());
  }
}
