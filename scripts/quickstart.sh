#!/usr/bin/env bash
# Quick start: from nothing to a delivered, verified webhook, against a running standalone service.
#
#   npm start                       # in another terminal: standalone, dev tools on
#   bash scripts/quickstart.sh      # BASE_URL=http://localhost:3000/api unless set
#
# Plain bash, curl and node (no jq, no uuidgen). Each step prints what it does and its key result; a
# failing step stops the script with the service's answer and a non-zero exit. The README's
# "Trying it" walks through these lines as they are here, and CI runs this script against a freshly
# started service (test/e2e/quickstart.e2e-spec.ts).
set -euo pipefail

BASE_URL="${BASE_URL:-http://localhost:3000/api}"
WAIT_S="${QUICKSTART_WAIT_S:-30}" # longest wait, in seconds, for the check-in email and for the webhook
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$(mktemp -d)"
RECEIVER_PID=""

# ---- helpers ---------------------------------------------------------------------------------------
STEP="start"
step() { STEP="$1"; printf '\n==> %s\n' "$1"; }
say() { printf '    %s\n' "$*"; }
# fail ANSWER [WHY]: names the step, says why, shows the service's answer (the error body), exits 1.
fail() {
  printf '\nquickstart: FAILED at "%s"%s\n' "$STEP" "${2:+: $2}" >&2
  if [[ -n "${1:-}" ]]; then printf '    answer: %s\n' "$1" >&2; fi
  exit 1
}
trap 'rc=$?; printf "\nquickstart: FAILED at \"%s\" (line %s exited %s)\n" "$STEP" "$LINENO" "$rc" >&2; exit "$rc"' ERR
cleanup() {
  if [[ -n "$RECEIVER_PID" ]]; then kill "$RECEIVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# json BODY EXPR: the value of the JavaScript expression EXPR, where j is BODY parsed; stops when missing.
json() {
  node -e '
    let j;
    try { j = JSON.parse(process.argv[1]); } catch { console.error(`not JSON: ${process.argv[1].slice(0, 500)}`); process.exit(1); }
    const v = eval(process.argv[2]);
    if (v === undefined || v === null) { console.error(`${process.argv[2]} is missing in ${process.argv[1].slice(0, 500)}`); process.exit(1); }
    console.log(typeof v === "string" ? v : JSON.stringify(v));' "$1" "$2"
}
uuid() { node -pe 'crypto.randomUUID()'; }
# wait_for_line FILE REGEX SECONDS: waits (bounded, and while the receiver runs) until a line of FILE
# matches REGEX, and prints it.
wait_for_line() {
  local deadline=$((SECONDS + $3))
  until grep -Em1 -- "$2" "$1"; do
    if ((SECONDS >= deadline)) || ! kill -0 "$RECEIVER_PID" 2>/dev/null; then return 1; fi
    sleep 0.2
  done
}

RUN="$(node -pe 'crypto.randomUUID().slice(0, 8)')" # this run's own patient, so runs never mix
PATIENT_EMAIL="ana.$RUN@example.com"
EXTERNAL_PATIENT_ID="EXT-$RUN"

# 0. The service is up
step "0. The service answers at $BASE_URL"
HEALTH=$(curl -sS --fail-with-body "$BASE_URL/healthz") || fail "$HEALTH" "no service at $BASE_URL (start one with npm start, or set BASE_URL)"
say "healthz: $(json "$HEALTH" j.status)"

# 1. A staff token
step "1. A staff ID token from the dev issuer (permission integrations.manage, MFA)"
STAFF=$(curl -sS --fail-with-body -X POST "$BASE_URL/dev/staff-tokens" -H 'content-type: application/json' \
  -d '{"sub":"ada","email":"ada@example.com"}') || fail "$STAFF"
STAFF_TOKEN=$(json "$STAFF" j.idToken)
say "idToken: ${STAFF_TOKEN:0:24}... (a JWT, 1 hour)"

# 2. An organization and its sandbox environment
step "2. An organization (you are its owner), and its sandbox environment"
ORG=$(curl -sS --fail-with-body -X POST "$BASE_URL/organizations" -H "authorization: Bearer $STAFF_TOKEN" \
  -H 'content-type: application/json' -d '{"name":"My Clinic"}') || fail "$ORG"
ORG_ID=$(json "$ORG" j.id)
ENV_ID=$(json "$ORG" 'j.environments.find((e) => e.kind === "sandbox").id')
E="$BASE_URL/organizations/$ORG_ID/environments/$ENV_ID"
say "organization $ORG_ID, sandbox environment $ENV_ID"

# 3. The BAA
step "3. Sign the BAA (until then every API-key call is 403 BAA_REQUIRED)"
BAA=$(curl -sS --fail-with-body -X POST "$BASE_URL/organizations/$ORG_ID/baa" -H "authorization: Bearer $STAFF_TOKEN" \
  -H 'content-type: application/json' -d '{"signerName":"Ada Lovelace","signerTitle":"CEO"}') || fail "$BAA"
say "baaSignedAt: $(json "$BAA" j.baaSignedAt)"

# 4. A sandbox API key
step "4. A sandbox API key (its secret is the field key, shown only in this answer)"
KEY=$(curl -sS --fail-with-body -X POST "$E/api-keys" -H "authorization: Bearer $STAFF_TOKEN" \
  -H 'content-type: application/json' -d '{"name":"quick start"}') || fail "$KEY"
API_KEY=$(json "$KEY" j.key)
[[ $API_KEY == svc_sb_* ]] || fail "$KEY" "a sandbox key begins svc_sb_"
PING=$(curl -sS --fail-with-body "$BASE_URL/v1/ping" -H "authorization: Bearer $API_KEY") || fail "$PING"
say "key ${API_KEY:0:12}... (prefix $(json "$KEY" j.prefix)); GET /v1/ping with it: $PING"

# 5. A webhook endpoint and the receiver
step "5. A webhook endpoint, and the README's receiver (scripts/webhook-receiver.js) listening at its url"
RECEIVER_PORT="${RECEIVER_PORT:-$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')}"
ENDPOINT=$(curl -sS --fail-with-body -X POST "$E/webhook-endpoints" -H "authorization: Bearer $STAFF_TOKEN" \
  -H 'content-type: application/json' -d "{\"url\":\"http://127.0.0.1:$RECEIVER_PORT/\",\"events\":[\"clinical_case.opened\"]}") || fail "$ENDPOINT"
WEBHOOK_SECRET=$(json "$ENDPOINT" j.secret)
WEBHOOK_SECRET="$WEBHOOK_SECRET" PORT="$RECEIVER_PORT" node "$HERE/webhook-receiver.js" >"$WORK/receiver.log" 2>&1 &
RECEIVER_PID=$!
LISTENING=$(wait_for_line "$WORK/receiver.log" 'listening on' 10) || fail "$(cat "$WORK/receiver.log")" "the receiver did not start"
say "endpoint $(json "$ENDPOINT" j.id), secret ${WEBHOOK_SECRET:0:10}... (shown once)"
say "receiver: $LISTENING"

# 6. A protocol with a red flag
step "6. A protocol: three questions, red flags (pain 7 or more is urgent), then activate it"
PROTOCOL=$(curl -sS --fail-with-body -X POST "$E/protocols" -H "authorization: Bearer $STAFF_TOKEN" \
  -H 'content-type: application/json' -d @- <<'JSON'
{ "programKey": "post-op", "name": "Post-op recovery", "defaultCadenceDays": 7,
  "questions": [
    { "key": "pain", "text": "How bad is your pain today?", "type": "scale", "min": 0, "max": 10 },
    { "key": "fever", "text": "Do you have a fever?", "type": "yes_no" },
    { "key": "other", "text": "Anything else?", "type": "text" } ],
  "redFlags": {
    "scores": [ { "question": "pain", "tier": "urgent", "op": ">=", "value": 7 } ],
    "phrases": [ { "phrase": "wound is leaking", "tier": "urgent" } ],
    "emergencyTerms": true } }
JSON
) || fail "$PROTOCOL"
PROTOCOL_ID=$(json "$PROTOCOL" j.id)
ACTIVATED=$(curl -sS --fail-with-body -X POST "$E/protocols/$PROTOCOL_ID/activate" -H "authorization: Bearer $STAFF_TOKEN") || fail "$ACTIVATED"
say "protocol $PROTOCOL_ID (programKey post-op), active: $(json "$ACTIVATED" j.active)"

# 7. A patient
step "7. Enrol a patient: the lifecycle event patient.created, with the API key"
PATIENT=$(curl -sS --fail-with-body -X POST "$BASE_URL/client/patient-events" -H "authorization: Bearer $API_KEY" \
  -H 'content-type: application/json' -d @- <<JSON
{ "eventId": "$(uuid)", "type": "patient.created", "externalPatientId": "$EXTERNAL_PATIENT_ID",
  "email": "$PATIENT_EMAIL", "firstName": "Ana", "programKey": "post-op" }
JSON
) || fail "$PATIENT"
PATIENT_ID=$(json "$PATIENT" j.patientId)
say "patientId $PATIENT_ID (accepted: $(json "$PATIENT" j.accepted), duplicate: $(json "$PATIENT" j.duplicate))"

# 8. A check-in email
step "8. A check-in now (staff route; the cadence would send it in 7 days), and its email in the dev outbox"
CHECK_IN=$(curl -sS --fail-with-body -X POST "$E/patients/$PATIENT_ID/check-ins" -H "authorization: Bearer $STAFF_TOKEN") || fail "$CHECK_IN"
CHECK_IN_ID=$(json "$CHECK_IN" j.checkInId)
say "checkInId $CHECK_IN_ID"
for ((i = 0; i < WAIT_S * 2; i++)); do
  OUTBOX=$(curl -sS --fail-with-body -G "$BASE_URL/dev/outbox" --data-urlencode "to=$PATIENT_EMAIL") || fail "$OUTBOX"
  if [[ $(json "$OUTBOX" 'j.emails.length') -gt 0 ]]; then break; fi
  sleep 0.5
done
[[ $(json "$OUTBOX" 'j.emails.length') -gt 0 ]] || fail "$OUTBOX" "no email to $PATIENT_EMAIL after $WAIT_S s"
CHECK_IN_LINK=$(json "$OUTBOX" '(j.emails.at(-1).text.match(/https?:\/\/\S+\/check-ins\/\S+/) ?? [])[0]')
CHECK_IN_TOKEN=$(node -pe 'new URL(process.argv[1]).searchParams.get("token")' "$CHECK_IN_LINK")
[[ $CHECK_IN_LINK == */check-ins/$CHECK_IN_ID\?token=* ]] || fail "$CHECK_IN_LINK" "the email's link is not this check-in's"
say "email \"$(json "$OUTBOX" 'j.emails.at(-1).subject')\" to $PATIENT_EMAIL, link ${CHECK_IN_LINK%%\?*}?token=..."

# 9. The answers
step "9. The patient opens the link (as JSON) and answers; pain 8 raises the red flag"
VIEW=$(curl -sS --fail-with-body "$CHECK_IN_LINK" -H 'accept: application/json') || fail "$VIEW"
say "questions: $(json "$VIEW" 'j.questions.map((q) => q.key).join(", ")')"
answer() { # answer QUESTION_KEY VALUE (VALUE as JSON)
  ANSWER=$(curl -sS --fail-with-body -X POST "$BASE_URL/widget/v1/check-ins/$CHECK_IN_ID/answers" \
    -H 'content-type: application/json' -d "{\"token\":\"$CHECK_IN_TOKEN\",\"questionKey\":\"$1\",\"value\":$2}") || fail "$ANSWER"
  say "$1 = $2 -> next: $(json "$ANSWER" 'j.next?.key ?? "none"'), emergency: $(json "$ANSWER" j.emergency)"
}
answer pain 8
answer fever false
answer other '"Feeling a bit better today"'

# 10. Completion: a case opens
step "10. Complete the check-in: the red flag opens a clinical case"
COMPLETE=$(curl -sS --fail-with-body -X POST "$BASE_URL/widget/v1/check-ins/$CHECK_IN_ID/complete" \
  -H 'content-type: application/json' -d "{\"token\":\"$CHECK_IN_TOKEN\"}") || fail "$COMPLETE"
[[ $(json "$COMPLETE" j.outcome) == case_opened ]] || fail "$COMPLETE" "expected outcome case_opened"
CASE_REFERENCE=$(json "$COMPLETE" j.caseReference)
CASES=$(curl -sS --fail-with-body "$E/clinical-cases" -H "authorization: Bearer $STAFF_TOKEN") || fail "$CASES"
CASE_ID=$(json "$CASES" "j.clinicalCases.find((c) => c.reference === '$CASE_REFERENCE')?.caseId")
say "outcome case_opened, case $CASE_REFERENCE (caseId $CASE_ID, from the staff case list)"

# 11. The webhook, verified
step "11. The webhook clinical_case.opened arrives at the receiver, which verifies its signature"
RECEIVED=$(wait_for_line "$WORK/receiver.log" '^received clinical_case\.opened ' "$WAIT_S") ||
  fail "$(cat "$WORK/receiver.log")" "the receiver logged no verified clinical_case.opened within $WAIT_S s"
say "receiver: $RECEIVED"

# 12. A case update
step "12. Report the first case update (processed, sequence 1) with the API key"
UPDATE=$(curl -sS --fail-with-body -X POST "$BASE_URL/v1/clinical-cases/$CASE_ID/updates" -H "authorization: Bearer $API_KEY" \
  -H 'content-type: application/json' -d "{\"updateId\":\"$(uuid)\",\"sequence\":1,\"status\":\"processed\",\"externalReference\":\"ticket-1\"}") || fail "$UPDATE"
say "update: $UPDATE"

# 13. The progress
step "13. Read the case's progress"
PROGRESS=$(curl -sS --fail-with-body "$BASE_URL/v1/clinical-cases/$CASE_ID/progress" -H "authorization: Bearer $API_KEY") || fail "$PROGRESS"
[[ $(json "$PROGRESS" j.status) == processed ]] || fail "$PROGRESS" "expected status processed"
say "progress: $PROGRESS"

printf '\n==> Done\n'
say "webhook verified: ${RECEIVED#received }"
say "progress read: case $CASE_REFERENCE status $(json "$PROGRESS" j.status), nextSequence $(json "$PROGRESS" j.nextSequence), transportDelivered $(json "$PROGRESS" j.transportDelivered)"
