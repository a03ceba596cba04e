package dev.idem.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class OutboxRecordTests {

  @Test
  void settersNameTheArgumentTheyReject() {
    assertThatThrownBy(() -> OutboxRecord.to(" ")).hasMessageContaining("destination must not be blank");
    assertThatThrownBy(() -> OutboxRecord.to("d").key("a\0b")).hasMessageContaining("key must not contain a NUL");
    assertThatThrownBy(() -> OutboxRecord.to("d").header("h", "x\0")).hasMessageContaining("header 'h'");
    assertThatThrownBy(() -> OutboxRecord.to("d").id("x".repeat(256))).hasMessageContaining("id must be at most 255");
    assertThatThrownBy(() -> OutboxRecord.to("d").build()).hasMessageContaining("payload is required");
  }

  @Test
  void payloadIsCopiedSoLaterChangesDoNotReachTheRow() {
    byte[] bytes = "abc".getBytes(StandardCharsets.UTF_8);
    OutboxRecord record = OutboxRecord.to("d").payload(bytes).build();
    bytes[0] = 'z';
    assertThat(new String(record.payload(), StandardCharsets.UTF_8)).isEqualTo("abc");
  }

  @Test
  void outboxTableNameIsValidatedAsAnIdentifier() {
    io.r2dbc.spi.ConnectionFactory none = io.r2dbc.spi.ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");
    assertThatThrownBy(() -> PostgresOutbox.create(none, "outbox; DROP TABLE x"))
        .hasMessageContaining("table must be a plain SQL identifier");
    assertThat(PostgresOutbox.create(none, "billing.outbox").schemaStatements())
        .anySatisfy(sql -> assertThat(sql).startsWith("CREATE TABLE IF NOT EXISTS billing.outbox ("));
    assertThat(PostgresOutbox.create(none, "billing.outbox").schemaStatements())
        .anySatisfy(sql -> assertThat(sql).startsWith("CREATE INDEX IF NOT EXISTS outbox_pending_idx ON billing.outbox (seq)"));
  }
}
