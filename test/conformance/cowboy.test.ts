/** The lifecycle scenarios on the reference peer: real Phoenix 1.7.14 on Cowboy 2.12.0 (test/conformance/scenarios.ts), and the property runs (test/conformance/properties.ts). */
import { conformance } from './scenarios.js'
import { lifecycleProperties } from './properties.js'
import { realPeer } from './peer.js'

conformance(realPeer('cowboy'))
lifecycleProperties(realPeer('cowboy'))
