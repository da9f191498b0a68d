/**
 * Durable deliveries (B3): a clinical case to open or a hand-off work item to post is first
 * recorded here (`CaseRequested` / `HandOffRequested`), then delivered over the bus with the same
 * request id until it is done (`DeliveryCompleted`) or refused for good (`DeliveryFailed`, a 4xx).
 */
import { Decider, DomainError } from '@svc/decider';

export interface CaseRequest {
  requestId: string;
  organizationId: string;
  environmentId: string;
  patientId: string;
  priority: 'emergency' | 'urgent' | 'routine';
  /** What the patient wrote (event data is encrypted at rest). */
  notes: string;
  matchedRules: string[];
  reason: 'emergency' | 'health_question' | 'hand_off';
  /**
   * A clinical hand-off's internal summary for staff (spec, step type hand_off: "staff see an
   * internal summary of the patient's answers at the top of the conversation"), posted by `system`
   * as the first message of the case thread once the case is open (idempotent by `requestId`).
   * Absent on other requests and on requests recorded before it existed.
   */
  summary?: { requestId: string; message: string } | null;
}

export interface HandOffRequest {
  requestId: string;
  organizationId: string;
  environmentId: string;
  conversationId: string;
  patientId: string | null;
  category: string;
  /** The work item's summary (encrypted at rest). */
  message: string;
}

export type DeliveryEvent =
  | ({ type: 'CaseRequested'; at: string } & CaseRequest)
  | ({ type: 'HandOffRequested'; at: string } & HandOffRequest)
  | { type: 'DeliveryCompleted'; caseId: string | null; reference: string | null; at: string }
  | { type: 'DeliveryFailed'; status: number; code: string; at: string };

export type DeliveryCommand =
  | { type: 'RequestCase'; request: CaseRequest }
  | { type: 'RequestHandOff'; request: HandOffRequest }
  | { type: 'Complete'; caseId: string | null; reference: string | null }
  | { type: 'Fail'; status: number; code: string };

export interface DeliveryState {
  request: ({ kind: 'case' } & CaseRequest) | ({ kind: 'work_item' } & HandOffRequest) | null;
  requestedAt: string | null;
  outcome: { status: 'delivered'; reference: string | null } | { status: 'failed'; code: string } | null;
}

export const deliveryStream = (requestId: string) => `workflow-engine-delivery-${requestId}`;
export const DELIVERY_STREAM_PREFIX = 'workflow-engine-delivery-';

export const deliveryDecider: Decider<DeliveryCommand, DeliveryEvent, DeliveryState> = {
  initialState: () => ({ request: null, requestedAt: null, outcome: null }),
  evolve(s, e) {
    switch (e.type) {
      case 'CaseRequested': {
        const { type: _t, at, ...request } = e;
        return { ...s, request: { kind: 'case', ...request }, requestedAt: at };
      }
      case 'HandOffRequested': {
        const { type: _t, at, ...request } = e;
        return { ...s, request: { kind: 'work_item', ...request }, requestedAt: at };
      }
      case 'DeliveryCompleted':
        return { ...s, outcome: { status: 'delivered', reference: e.reference } };
      case 'DeliveryFailed':
        return { ...s, outcome: { status: 'failed', code: e.code } };
      default: {
        const never: never = e;
        return never;
      }
    }
  },
  decide(c, s, now) {
    const at = now.toISOString();
    switch (c.type) {
      case 'RequestCase':
        if (s.request) return []; // the same request id: recorded already
        return [{ type: 'CaseRequested', ...c.request, at }];
      case 'RequestHandOff':
        if (s.request) return [];
        return [{ type: 'HandOffRequested', ...c.request, at }];
      case 'Complete':
        if (!s.request) throw new DomainError(404, 'NOT_FOUND', 'Delivery not found');
        if (s.outcome) return [];
        return [{ type: 'DeliveryCompleted', caseId: c.caseId, reference: c.reference, at }];
      case 'Fail':
        if (!s.request) throw new DomainError(404, 'NOT_FOUND', 'Delivery not found');
        if (s.outcome) return [];
        return [{ type: 'DeliveryFailed', status: c.status, code: c.code, at }];
      default: {
        const never: never = c;
        return never;
      }
    }
  },
};
