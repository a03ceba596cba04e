/**
 * PostgreSQL over R2DBC: the inbox table that records processed ids
 * ({@link dev.idem.postgres.PostgresInbox}, plain or with a {@link dev.idem.postgres.RotatingLayout}),
 * and connection pools that suit the pipeline ({@link dev.idem.postgres.PostgresConnections}).
 */
@NullMarked
package dev.idem.postgres;

import org.jspecify.annotations.NullMarked;
