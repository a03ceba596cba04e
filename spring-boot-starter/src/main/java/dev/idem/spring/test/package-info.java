/**
 * Test support for Spring Boot applications: {@link dev.idem.spring.test.SpringHandlerContracts}
 * runs idem-test's {@link dev.idem.test.HandlerContract} on a handler whose Spring Data R2DBC
 * repositories, {@code DatabaseClient} or {@code @Transactional} services join the message's
 * transaction. Needs {@code dev.idem:idem-test} on the test class path.
 */
@NullMarked
package dev.idem.spring.test;

import org.jspecify.annotations.NullMarked;
