/** The app's public surface (@apps/case-ledger): its root module, for the standalone composition root. */
export { CaseLedgerModule } from './case-ledger.module';
/** Its projections, for the composition roots that rebuild read models (`svc rebuild`). */
export { caseLedgerProjections } from './read-model';
