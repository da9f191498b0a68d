import { caseStream } from '../../case-ledger/src/domain/case';
import { conversationStream } from '../../conversation/src/domain/conversation';
import { apiKeyStream } from '../../gateway/src/domain/api-key';
import { environmentStream } from '../../gateway/src/domain/environment';
import { identityTokenStream } from '../../gateway/src/domain/identity-token';
import { organizationStream } from '../../gateway/src/domain/organization';
import { checkInStream, eventIdStream, identityStream, patientStream, programKeyStream, protocolStream } from '../../patient-pathway/src/domain/streams';
import { accountStream } from '../../webhook-dispatcher/src/domain/account';
import { deliveryStream as webhookDeliveryStream } from '../../webhook-dispatcher/src/domain/delivery';
import { endpointStream } from '../../webhook-dispatcher/src/domain/endpoint';
import { usageStream } from '../../webhook-dispatcher/src/domain/usage';
import { deliveryStream as workflowRequestStream } from '../../workflow-engine/src/domain/delivery';
import { destinationKeyStream, destinationStream } from '../../workflow-engine/src/domain/destination';
import { runStream } from '../../workflow-engine/src/domain/run';
import { widgetTurnStream } from '../../workflow-engine/src/domain/widget-turn';
import { workflowKeyStream, workflowStream } from '../../workflow-engine/src/domain/workflow';
import { CHAIN_ANCHOR_STREAM, checkpointStream } from '@svc/eventstore';
import { auditStream } from '../src/context';
import { CATEGORIES, CONCERNS, categoryOf, categoryPrefix, details, phrase } from '../src/vocabulary';

/** The CLI's names for streams, held to the stream names each context's domain code builds. */
describe('audit CLI vocabulary', () => {
  const id = '3f2a0000-0000-4000-8000-000000000001';
  const env = '9b1c0000-0000-4000-8000-000000000002';
  const built: Record<string, string> = {
    case: caseStream(id),
    conversation: conversationStream(id),
    patient: patientStream(id),
    'check-in': checkInStream(id),
    protocol: protocolStream(id),
    'patient-identity': identityStream(env, 'ab'.repeat(32)),
    'lifecycle-event': eventIdStream(env, id),
    'program-key': programKeyStream(env, 'weekly'),
    organization: organizationStream(id),
    environment: environmentStream(id),
    'api-key': apiKeyStream(id),
    'identity-token': identityTokenStream(env, 'k'),
    account: accountStream(id),
    'webhook-endpoint': endpointStream(id),
    'webhook-delivery': webhookDeliveryStream(id),
    usage: usageStream(id, '2026-05-01T00:00:00.000Z'),
    workflow: workflowStream(id),
    'workflow-key': workflowKeyStream(env, 'k'),
    'workflow-run': runStream(id),
    destination: destinationStream(id),
    'destination-key': destinationKeyStream(env, 'k'),
    'widget-turn': widgetTurnStream(id),
    'workflow-request': workflowRequestStream(id),
    'decrypting-reads': auditStream(new Date('2026-05-04T00:00:00Z')),
    checkpoints: checkpointStream(2500),
    'chain-anchors': CHAIN_ANCHOR_STREAM,
  };

  it.each(Object.entries(built))('%s: the stream the domain names belongs to that category', (name, streamId) => {
    expect(categoryOf(streamId)?.name).toBe(name);
  });

  it('names every category once, and every category a history follows exists', () => {
    expect(CATEGORIES.map((c) => c.name).sort()).toEqual(Object.keys(built).sort());
    for (const names of Object.values(CONCERNS)) for (const n of names) expect(CATEGORIES.some((c) => c.name === n)).toBe(true);
  });

  it('--category takes a short name or a stream id prefix', () => {
    expect(categoryPrefix('case')).toBe('case-ledger-case-');
    expect(categoryPrefix('case-ledger-case')).toBe('case-ledger-case-');
    expect(categoryPrefix('gateway-')).toBe('gateway-');
  });

  it("speaks the contract's words, spells out unknown types, and shows no free text in details", () => {
    expect(phrase('PatientEnrolled')).toBe('patient.created — patient enrolled');
    expect(phrase('clinical_case.resolved')).toBe('clinical_case.resolved — case resolved');
    expect(phrase('SomethingNewHappened')).toBe('something new happened');
    expect(details({ status: 'processed', sequence: 1, message: 'canary text', caseId: id }, id)).toBe('status=processed sequence=1');
  });
});
