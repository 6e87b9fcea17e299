// The ACP types index.d.ts re-exports, from @agentclientprotocol/sdk.
//
// The SDK is an ES module, and this package is CommonJS, so index.d.ts is a CommonJS declaration
// file. Under `moduleResolution: node16`/`nodenext`, a CommonJS file may only import an ES module's
// types with `with { 'resolution-mode': 'import' }`, which TypeScript before 5.3 cannot parse
// (TS1005, even with skipLibCheck). This file is an ES module (.d.mts) wherever it is read, so it
// imports the SDK in the ordinary way; index.d.ts includes it with `/// <reference path>`, which
// involves no module resolution, and reads the types from the global interface it declares.
// An interface, not type aliases, so that two copies of this package in one program merge
// instead of clashing.
import type { ContentBlock, SessionUpdate, StopReason } from '@agentclientprotocol/sdk'

declare global {
  /** Not for use outside cursor-acp-native's typings: import these types from the package. */
  interface CursorAcpNativeAcpTypes {
    ContentBlock: ContentBlock
    SessionUpdate: SessionUpdate
    StopReason: StopReason
  }
}
