/** The lifecycle scenarios on the simulator, as each measured web server (test/conformance/scenarios.ts). */
import { conformance } from './scenarios.js'
import { simulatorPeer } from './peer.js'

conformance(simulatorPeer('bandit'))
conformance(simulatorPeer('cowboy'))
