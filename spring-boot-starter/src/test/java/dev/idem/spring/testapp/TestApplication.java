package dev.idem.spring.testapp;

import org.springframework.boot.autoconfigure.SpringBootApplication;

/** The starter tests' application: R2DBC from {@code spring.r2dbc.url}, a Spring Data repository, Idem. */
@SpringBootApplication
public class TestApplication {}
