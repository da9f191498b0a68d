import { InMemoryEventStore } from '@svc/eventstore';
import { describeEventStoreConformance } from './conformance';

describeEventStoreConformance('in-memory', async () => {
  const store = new InMemoryEventStore();
  return { store, ordered: true, cleanup: () => store.close() };
});
