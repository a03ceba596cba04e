package dev.idem.failover;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Handler;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.spring.IdemConsumers;
import dev.idem.spring.ManagedConsumer;
import dev.idem.testing.PostgresService;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.r2dbc.core.DatabaseClient;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Spring Boot's entry point on the formation: an application with Idem's starter whose only
 * database setting is {@code spring.r2dbc.url}, the multi-host URL
 * {@code r2dbc:postgresql:failover://postgres@standby,primary/test?targetServerType=primary} with
 * the standby listed first, and a RabbitMQ consumer declared in configuration whose handler writes
 * through Spring's {@link DatabaseClient} in the message's transaction. Spring Boot's pool reaches
 * the primary, never the standby listed first; through a planned switch with messages flowing it
 * follows the new primary (Spring's transaction manager hands connections back to the pool, which
 * drops the broken ones), every message is applied exactly once on the new primary and nothing is
 * left on the queue.
 */
class SpringBootFailoverIntegrationTests {

  private static final RabbitService RABBIT = RabbitService.get();

  static {
    // Keep the module's logback-test.xml as it is: the other tests of this JVM capture Idem's WARNs.
    System.setProperty("org.springframework.boot.logging.LoggingSystem", "none");
  }
  private final Formation formation = Formation.get();

  @Test
  void springR2dbcUrlWithEveryNodeReachesThePrimaryAndAConfiguredConsumerFollowsAPlannedSwitch() throws Exception {
    formation.awaitHealthy();
    String primary = formation.primary();
    String standby = Formation.others(primary).get(0);
    String name = PostgresService.uniqueName("spring_failover");
    String table = name + "_effects";
    Formation.query(formation.failoverUrl(), "CREATE TABLE " + table + " (message_id text NOT NULL, body text NOT NULL, "
        + "at timestamptz NOT NULL DEFAULT clock_timestamp())");
    RabbitTopology.declare(RABBIT.admin(), name, RabbitTopology.QueueType.CLASSIC);
    String at = "--idem.consumers." + name + ".";
    ConfigurableApplicationContext context = new SpringApplicationBuilder(FailoverApplication.class).web(WebApplicationType.NONE)
        .run("--spring.r2dbc.url=" + formation.failoverUrl(standby),
            "--spring.r2dbc.pool.initial-size=1", "--spring.r2dbc.pool.max-size=8", "--idem.inbox.table=" + name + "_inbox",
            "--failover.effects-table=" + table, at + "handler=effectHandler", at + "source.type=rabbitmq",
            at + "source.uri=" + RABBIT.uri(), at + "source.queue=" + name);
    AtomicLong published = new AtomicLong();
    boolean[] stopped = {false};
    Disposable publisher = null;
    try {
      ConnectionFactory pool = context.getBean(ConnectionFactory.class);
      assertThat(server(pool)).as("the node Spring Boot's pool reaches (the standby is listed first)")
          .isEqualTo(formation.port(primary) + ":false");
      ManagedConsumer consumer = context.getBean(IdemConsumers.class).consumer(name).orElseThrow();

      // A payment every 20 ms, every tenth with a repeat of an earlier one; publishing is serialised with the stop.
      publisher = Flux.interval(Duration.ofMillis(20)).onBackpressureDrop().publishOn(Schedulers.boundedElastic(), 1)
          .subscribe(tick -> {
            synchronized (published) {
              if (stopped[0]) {
                return;
              }
              long n = published.get() + 1;
              RABBIT.publish(name, n % 10 == 0
                  ? List.of(RabbitService.message("s-" + n, "payment " + n),
                      RabbitService.message("s-" + (n - 5), "payment " + (n - 5)))
                  : List.of(RabbitService.message("s-" + n, "payment " + n)));
              published.set(n);
            }
          });
      Awaitility.await("messages applied before the switch").atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
          .until(() -> Long.parseLong(Formation.query(formation.nodeUrl(primary), "SELECT count(*)::text FROM " + table)) >= 100);

      long triggeredAtMillis = System.currentTimeMillis();
      formation.performFailover();
      long afterSwitch = published.get();
      Awaitility.await("messages applied on the new primary").atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200))
          .until(() -> formation.writableOtherThan(primary).map(node -> Long.parseLong(Formation.query(formation.nodeUrl(node),
              "SELECT count(*)::text FROM " + table + " WHERE substr(message_id, 3)::bigint > " + afterSwitch)) >= 100)
              .orElse(false));
      String newPrimary = formation.primary();
      long last;
      synchronized (published) {
        stopped[0] = true;
        publisher.dispose();
        last = published.get();
      }

      Awaitility.await("every message applied and acknowledged").atMost(Duration.ofSeconds(90))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> RABBIT.messageCount(name) == 0 && consumer.unsettled() == 0
              && Long.parseLong(Formation.query(formation.failoverUrl(), "SELECT count(*)::text FROM " + table)) >= last);
      assertThat(Formation.query(formation.failoverUrl(), "SELECT count(*) || ':' || count(DISTINCT message_id) FROM " + table))
          .as("effect rows : distinct ids on the new primary").isEqualTo(last + ":" + last);
      assertThat(RABBIT.messageCount(RabbitTopology.deadLetterQueue(name))).as("dead letters").isZero();
      assertThat(newPrimary).isNotEqualTo(primary);
      assertThat(server(pool)).as("the node Spring Boot's pool reaches after the switch")
          .isEqualTo(formation.port(newPrimary) + ":false");
      // The first row after the longest pause in the writes since the trigger: the first commit on the new primary.
      String firstCommit = Formation.query(formation.failoverUrl(),
          "SELECT round(extract(epoch FROM at) * 1000)::bigint::text FROM "
              + "(SELECT at, at - lag(at) OVER (ORDER BY at) AS pause FROM " + table + " WHERE at >= to_timestamp("
              + triggeredAtMillis
              + " / 1000.0)) w ORDER BY pause DESC NULLS LAST LIMIT 1");
      System.out.printf(
          "Spring Boot, planned switch: the configured consumer wrote on the new primary %.2f s after the trigger%n",
          (Long.parseLong(firstCommit) - triggeredAtMillis) / 1e3);
    } finally {
      if (publisher != null) {
        publisher.dispose();
      }
      context.close();
      RabbitTopology.delete(RABBIT.admin(), name);
      Formation.query(formation.failoverUrl(), "DROP TABLE IF EXISTS " + table + ", " + name + "_inbox");
    }
  }

  /** {@code port:in_recovery} of the server a connection from {@code factory} reaches. */
  private static String server(ConnectionFactory factory) {
    return Mono.usingWhen(Mono.from(factory.create()),
        (Connection c) -> Flux.from(c.createStatement("SELECT inet_server_port() || ':' || pg_is_in_recovery()").execute())
            .concatMap(r -> r.map((row, meta) -> row.get(0, String.class))).next(),
        Connection::close)
        .block(Duration.ofSeconds(30));
  }

  /** The application: Spring Boot's auto-configuration (R2DBC from {@code spring.r2dbc.url}, Idem's starter) and a handler. */
  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class FailoverApplication {

    /**
     * One row per message, through Spring's {@link DatabaseClient}, which joins the message's transaction.
     *
     * @param connectionFactory Spring Boot's pool
     * @param environment for {@code failover.effects-table}
     * @return the handler
     */
    @Bean
    Handler<String> effectHandler(ConnectionFactory connectionFactory, Environment environment) {
      DatabaseClient db = DatabaseClient.create(connectionFactory);
      String table = environment.getRequiredProperty("failover.effects-table");
      return (body, tx) -> db.sql("INSERT INTO " + table + " (message_id, body) VALUES (:id, :body)")
          .bind("id", tx.messageId()).bind("body", body).fetch().rowsUpdated();
    }
  }
}
