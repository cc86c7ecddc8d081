// Types of the deep imports in prom.ts, borrowed from prom-client's own.
declare module 'prom-client/lib/registry.js' {
  import { Registry } from 'prom-client'
  export default Registry
}
declare module 'prom-client/lib/counter.js' {
  import { Counter } from 'prom-client'
  export default Counter
}
declare module 'prom-client/lib/gauge.js' {
  import { Gauge } from 'prom-client'
  export default Gauge
}
