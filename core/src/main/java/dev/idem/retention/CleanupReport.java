package dev.idem.retention;

import java.time.Duration;
import java.util.List;

/**
 * What one cleanup run of {@link Retention} did.
 *
 * @param tables one entry per cleaned table, in configuration order
 */
public record CleanupReport(List<TableReport> tables) {

  /**
   * Rows removed from all tables.
   *
   * @return the sum
   */
  public long removed() {
    return tables.stream().mapToLong(TableReport::removed).sum();
  }

  /**
   * What a run did to one table.
   *
   * @param table the table
   * @param removed rows removed (estimated for truncated slots)
   * @param batches statements run
   * @param longestBatch the longest batch, lock wait included
   * @param oldestKept the age of the oldest row kept after the run (for a rotating inbox: the
   *     start of the oldest period still kept)
   * @param skipped slots whose truncation was skipped because their lock was not free in time, or
   *     was granted only after the slot's next period had begun
   */
  public record TableReport(String table, long removed, int batches, Duration longestBatch, Duration oldestKept, int skipped) {}
}
