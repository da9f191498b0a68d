import { Observable, of, throwError } from 'rxjs';
import { InMemoryEventStore } from '../../../libs/eventstore/src/memory-event-store';
import { DeliveriesService } from '../src/application/deliveries.service';
import { workflowProjection, WorkflowCollections } from '../src/read-model/workflow.projection';

/** B3: cases and hand-offs are recorded first, then delivered with the same request id until done or refused. */
describe('DeliveriesService', () => {
  const clock = { now: () => new Date('2026-01-01T00:00:00Z') };
  const request = {
    requestId: '11111111-1111-5111-8111-111111111111',
    organizationId: 'o',
    environmentId: 'e',
    patientId: 'p',
    priority: 'emergency' as const,
    notes: 'n',
    matchedRules: [],
    reason: 'emergency' as const,
  };
  function setUp(answers: (() => Observable<unknown>)[]) {
    const sent: { pattern: string; payload: { requestId: string } }[] = [];
    const bus = { send: (pattern: string, payload: { requestId: string }) => (sent.push({ pattern, payload }), answers.shift()!()) };
    const store = new InMemoryEventStore();
    return { sent, store, service: new DeliveriesService(store, clock as never, bus as never) };
  }

  it('a transient failure stays pending and the retry delivers with the same request id', async () => {
    const { sent, service } = setUp([
      () => throwError(() => new Error('timeout')),
      () => of({ caseId: 'c', reference: 'CASE-1', priority: 'emergency', duplicate: false }),
    ]);
    await service.requestCase(request, 'patient:p');
    await expect(service.tryDeliver(request.requestId)).resolves.toEqual({ status: 'pending' });
    await expect(service.deliver(request.requestId)).resolves.toEqual({ status: 'delivered', reference: 'CASE-1' });
    await expect(service.deliver(request.requestId)).resolves.toEqual({ status: 'delivered', reference: 'CASE-1' });
    expect(sent.map((s) => s.payload.requestId)).toEqual([request.requestId, request.requestId]);
  });

  it('a 4xx refusal is recorded for good and never retried', async () => {
    const { sent, service } = setUp([() => throwError(() => ({ status: 404, code: 'NOT_FOUND', message: 'no patient' }))]);
    await service.requestCase(request, 'patient:p');
    await expect(service.tryDeliver(request.requestId)).resolves.toEqual({ status: 'failed' });
    await expect(service.deliver(request.requestId)).resolves.toEqual({ status: 'failed' });
    expect(sent).toHaveLength(1);
  });

  it('the projection keeps a retry timer until the request is delivered or refused', async () => {
    const { store, service } = setUp([() => of({ caseId: 'c', reference: 'CASE-1', priority: 'emergency', duplicate: false })]);
    await service.requestCase(request, 'patient:p');
    await service.deliver(request.requestId);
    const events = await store.readStream(`workflow-engine-delivery-${request.requestId}`);
    expect(events.map((e) => e.type)).toEqual(['CaseRequested', 'DeliveryCompleted']);
    const puts: string[] = [];
    const tx = {
      put: (c: string, id: string) => puts.push(`put ${c} ${id}`),
      delete: (c: string, id: string) => puts.push(`delete ${c} ${id}`),
      get: async () => null,
    };
    const projection = workflowProjection({} as never);
    for (const e of events) await projection.apply(e, tx as never);
    expect(puts).toEqual([`put ${WorkflowCollections.deliveries} ${request.requestId}`, `delete ${WorkflowCollections.deliveries} ${request.requestId}`]);
  });
});
