//! A local port that refuses connections for as long as the test holds it.

use std::net::SocketAddr;

/// A loopback port bound by a socket that never listens: a connection to it is refused. Held
/// rather than bound and let go, so that for the test's whole length no other process can start
/// listening there, and no client socket can be given it as its own port (a connection from a
/// port to itself succeeds on its own, and a test waiting for a refusal would hang).
pub struct ClosedPort {
    socket: tokio::net::TcpSocket,
}

impl ClosedPort {
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bound to a loopback port");
        Self { socket }
    }

    pub fn port(&self) -> u16 {
        self.socket.local_addr().expect("bound").port()
    }
}
