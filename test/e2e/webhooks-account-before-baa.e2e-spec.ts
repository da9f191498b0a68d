import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { verifyWebhook } from '@svc/security';
import { WebhookReceiver } from '../../apps/webhook-dispatcher/test/receiver';

/** Issue 5: account events carry no patient data and are never held, even before the BAA is signed. */
describe('account events before the BAA (e2e, real receiver)', () => {
  const app = new TestApp();
  const receiver = new WebhookReceiver();
  beforeAll(async () => {
    await app.start();
    await receiver.start();
  });
  afterAll(async () => {
    await receiver.stop();
    await app.stop();
  });

  it('delivers subscription.updated to an organization that has not signed its BAA', async () => {
    const t = await app.tenant({ baa: false });
    const url = receiver.script('/account', [200]);
    const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url, events: ['subscription.updated'] }, t.staff);
    expect(ep.status).toBe(201);
    expect(
      (await app.api.post(`/organizations/${t.orgId}/billing-events`, { eventId: randomUUID(), type: 'payment_failed', invoiceId: 'inv-1' }, t.staff)).status,
    ).toBe(202);
    const [got] = await receiver.waitFor('/account', 1);
    const event = await verifyWebhook<{ status: string; previousStatus: string }>({
      rawBody: got.rawBody,
      headers: got.headers as Record<string, string>,
      secret: ep.body.secret,
      seen: null,
      toleranceSec: 3600 * 24 * 365,
    });
    expect(event.type).toBe('subscription.updated');
    expect(event.data).toMatchObject({ status: 'grace_period', previousStatus: 'active' });
    // The attempt is recorded after the receiver answered: read the log until it shows it.
    let statuses: string[] = [];
    for (let i = 0; i < 100; i++) {
      const log = await app.api.get(`${t.env}/webhook-endpoints/${ep.body.id}/deliveries`, t.staff);
      statuses = log.body.deliveries.map((d: { status: string }) => d.status);
      if (statuses[0] === 'delivered') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(statuses).toEqual(['delivered']);
  });
});
