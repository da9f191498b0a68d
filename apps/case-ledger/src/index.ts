/** The app's public surface (@apps/case-ledger): its root module, for the standalone composition root. */
export { CaseLedgerModule } from './case-ledger.module';
