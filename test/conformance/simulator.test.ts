/** The lifecycle scenarios on the simulator, as each measured web server (test/conformance/scenarios.ts), and the property runs (test/conformance/properties.ts). */
import { conformance } from './scenarios.js'
import { lifecycleProperties } from './properties.js'
import { simulatorPeer } from './peer.js'

conformance(simulatorPeer('bandit'))
conformance(simulatorPeer('cowboy'))
lifecycleProperties(simulatorPeer('bandit'))
lifecycleProperties(simulatorPeer('cowboy'))
