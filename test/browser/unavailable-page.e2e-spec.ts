import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module } from '@nestjs/common';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { GatewayProxy, announceUpstream, createHttpApp, loadConfig, routesOf } from '@svc/platform';
import { SqliteReadStore } from '@svc/read-store';
import { freePort } from '@svc/testing';
import { Browser, axe, describeInBrowser, launch, watch } from './browser';

@Module({})
class EmptyGatewayModule {}

/**
 * A patient's check-in link opened while the app behind it (the patient-pathway) is down: the
 * gateway answers the browser with a page, not the 503's JSON. A gateway (GatewayProxy) whose route
 * table sends the check-in page's address to a port nothing listens on, opened in Chromium.
 */
describeInBrowser('the page a browser gets from the gateway when the app behind a page is down', () => {
  let dir: string;
  let store: SqliteReadStore;
  let gateway: NestFastifyApplication;
  let proxy: GatewayProxy;
  let base: string;
  let browser: Browser;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'unavailable-page-'));
    store = new SqliteReadStore(join(dir, 'read.sqlite'));
    // A port nothing listens on (an app that is down).
    const downPort = await freePort();
    await announceUpstream(store, {
      app: 'patient-pathway',
      origin: `http://127.0.0.1:${downPort}`,
      routes: [{ method: 'GET', url: '/api/check-ins/:checkInId' }],
      announcedAt: new Date().toISOString(),
    });
    const config = loadConfig({ NODE_ENV: 'test', SVC_DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', SVC_RATE_LIMITS: 'off' }, 'distributed');
    gateway = await createHttpApp(EmptyGatewayModule, config);
    proxy = new GatewayProxy({ readStore: store, self: 'gateway', timeoutMs: 1000, refreshMs: 100, bodyLimit: 1024 * 1024 });
    await proxy.start();
    proxy.register(gateway.getHttpAdapter().getInstance() as never);
    await gateway.listen(0, '127.0.0.1');
    proxy.setOwnRoutes(routesOf(gateway));
    base = `http://127.0.0.1:${(gateway.getHttpServer().address() as AddressInfo).port}`;
    browser = await launch();
  });

  afterAll(async () => {
    await browser?.close();
    await gateway?.close();
    await proxy?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['en-US', 'This page is not available right now', 'Try again'],
    ['es-MX', 'Esta página no está disponible en este momento', 'Intentar de nuevo'],
  ])('%s: a kind page in the reader’s language, nothing blocked, accessible, and "try again" loads the link again', async (locale, heading, again) => {
    const context = await browser.context({ locale });
    try {
      const page = await context.newPage();
      const seen = watch(page);
      const link = `${base}/api/check-ins/4f7c9a0e-1b2c-4d3e-8f90-123456789abc?token=canary-token`;
      const res = await page.goto(link);
      expect(res?.status()).toBe(503);
      await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe(heading);
      expect(await page.locator('html').getAttribute('lang')).toBe(locale.slice(0, 2));
      expect(await page.locator('body').textContent()).not.toMatch(/UNAVAILABLE|canary-token|\{/);
      expect(await axe(page)).toEqual([]);
      // The link loads the same address again (the check-in page once the app is back).
      const [reload] = await Promise.all([page.waitForResponse((r) => r.url() === link), page.getByRole('link', { name: again }).click()]);
      expect(reload.status()).toBe(503);
      // Nothing the page asked for left this origin; no policy violation, no script error.
      expect((await seen.sent()).filter((r) => !r.url.startsWith(base))).toEqual([]);
      expect(seen.problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
