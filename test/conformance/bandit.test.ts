/** The lifecycle scenarios on the reference peer: real Phoenix 1.7.14 on Bandit 1.6.11 (test/conformance/scenarios.ts), and the property runs (test/conformance/properties.ts). */
import { conformance } from './scenarios.js'
import { lifecycleProperties } from './properties.js'
import { realPeer } from './peer.js'

conformance(realPeer('bandit'))
lifecycleProperties(realPeer('bandit'))
