package dev.idem.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The one table of a throughput run, as a Markdown table with aligned columns: each row's rate,
 * each Idem row's rate as a multiple of its broker's peers (the broker alone, the JDBC loop with a
 * transaction per message, the JDBC loop with a transaction per poll), the consumer's CPU per
 * 1,000 messages, and the check.
 */
final class ResultTable {

  private static final String[] HEADER = {"broker", "row", "msg/s", "x broker", "x JDBC tx/msg", "x JDBC tx/poll", "CPU s/1k msg", "check"};
  private static final boolean[] RIGHT = {false, false, true, true, true, true, true, false};

  private ResultTable() {}

  static String format(List<RowResult> rows) {
    List<String[]> cells = new ArrayList<>();
    cells.add(HEADER);
    for (RowResult row : rows) {
      boolean ratios = row.kind() == RowResult.Kind.IDEM;
      cells.add(new String[] {
          row.broker(),
          row.id() + " " + row.name(),
          row.ok() ? String.format(Locale.ROOT, "%,.0f", row.messagesPerSecond()) : "-",
          ratios || row.kind() == RowResult.Kind.ADAPTER ? ratio(row, peer(rows, row.broker(), RowResult.Kind.BROKER)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.JDBC_MESSAGE)) : "",
          ratios ? ratio(row, peer(rows, row.broker(), RowResult.Kind.JDBC_POLL)) : "",
          row.ok() ? String.format(Locale.ROOT, "%.3f", row.cpuSecondsPerThousand()) : "-",
          row.ok() ? "ok" : "FAILED: " + String.join("; ", row.failures())
      });
    }
    int[] widths = new int[HEADER.length];
    for (String[] line : cells) {
      for (int c = 0; c < line.length; c++) {
        widths[c] = Math.max(widths[c], line[c].length());
      }
    }
    StringBuilder out = new StringBuilder();
    for (int l = 0; l < cells.size(); l++) {
      appendLine(out, cells.get(l), widths);
      if (l == 0) {
        out.append('|');
        for (int c = 0; c < widths.length; c++) {
          out.append(RIGHT[c] ? " " + "-".repeat(widths[c] - 1) + ": |" : " " + "-".repeat(widths[c]) + " |");
        }
        out.append('\n');
      }
    }
    return out.toString();
  }

  private static void appendLine(StringBuilder out, String[] line, int[] widths) {
    out.append('|');
    for (int c = 0; c < line.length; c++) {
      String pad = " ".repeat(widths[c] - line[c].length());
      out.append(' ').append(RIGHT[c] ? pad + line[c] : line[c] + pad).append(" |");
    }
    out.append('\n');
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
