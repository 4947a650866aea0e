//! A plain TCP client socket on the engine's reactor, reused from one connection to the next.
//!
//! With a new connection per request the generator spends nearly all of its time in the
//! kernel. Part of that is what the server sees (handshake, request, response, FIN both
//! ways), part is only the generator's: creating a socket, registering it with epoll,
//! setting TCP_NODELAY, and on close tearing the socket down and removing it from epoll.
//! A TCP socket can instead be disconnected (`connect` to an AF_UNSPEC address, see
//! connect(2)) and connected again: same descriptor, same epoll registration, same options.
//! The server sees what close(2) would have shown it, provided the socket is disconnected
//! only when its connection has fully ended (the server's FIN received, ours sent and
//! acknowledged: state CLOSE). Any other socket is simply closed. One difference remains:
//! close(2) with unread bytes in the socket sends a reset where `finish` has already sent a
//! FIN; only a server that sends bytes after a complete response (which the engine never
//! read) would see it.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use socket2::{Domain, SockAddr, Type};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::reactor::{Direction, Reactor, Token};

/// `tcpi_state` of a connection that has fully ended (include/net/tcp_states.h).
const TCP_STATE_CLOSE: u8 = 7;
/// The kernel grows a socket's receive buffer only after a connection delivered more than
/// its initial receive space (at least ten segments of 536 bytes) within one round trip;
/// a connection that received less cannot have changed it.
const RECEIVE_BUFFER_UNTOUCHED_BYTES: u64 = 4096;

pub struct Socket {
    socket: socket2::Socket,
    reactor: Rc<Reactor>,
    token: Token,
    ipv6: bool,
    /// SO_RCVBUF as created. A socket whose buffer the kernel grew is not reused, so that
    /// every connection opens with the receive window that a new socket would offer.
    initial_receive_buffer: usize,
}

impl Socket {
    /// Starts connecting to `addr` on `spare` (an unconnected socket from `finish`) if it
    /// is of the same family, else on a new socket; `connected` waits for the handshake.
    pub fn connect(reactor: &Rc<Reactor>, addr: SocketAddr, spare: Option<Socket>) -> io::Result<Socket> {
        let target = SockAddr::from(addr);
        if let Some(socket) = spare.filter(|s| s.ipv6 == addr.is_ipv6()) {
            // Whatever the kernel said about the last connection no longer holds.
            socket.reactor.clear(socket.token);
            start_connect(socket.fd(), &target)?;
            return Ok(socket);
        }
        let socket = socket2::Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking(), None)?;
        // Requests are written whole; Nagle would only delay them. Set once per socket.
        socket.set_tcp_nodelay(true)?;
        let initial_receive_buffer = socket.recv_buffer_size()?;
        start_connect(socket.as_raw_fd(), &target)?;
        // Registered after connect(): before it, the unconnected socket would report a hang-up.
        let token = reactor.register(socket.as_raw_fd())?;
        Ok(Socket { socket, reactor: Rc::clone(reactor), token, ipv6: addr.is_ipv6(), initial_receive_buffer })
    }

    /// Waits until the TCP handshake has completed, or failed (with the kernel's error).
    pub async fn connected(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.reactor.poll_ready(self.token, Direction::Write, cx)).await;
        if !self.reactor.hung_up(self.token) {
            return Ok(());
        }
        Err(self.socket.take_error()?.unwrap_or_else(|| io::Error::other("connection closed while connecting")))
    }

    /// Ends a connection whose response was read to its end and that will carry nothing
    /// more: sends our FIN and, if the connection has then ended on both sides, returns the
    /// socket disconnected, ready for `connect`. Otherwise it is closed as close(2) would.
    pub fn finish(self, received_bytes: u64) -> Option<Socket> {
        let fd = self.fd();
        // SAFETY: fd is an open socket owned by self.
        if unsafe { libc::shutdown(fd, libc::SHUT_WR) } < 0 || tcp_state(fd)? != TCP_STATE_CLOSE {
            return None;
        }
        if received_bytes > RECEIVE_BUFFER_UNTOUCHED_BYTES
            && self.socket.recv_buffer_size().ok()? != self.initial_receive_buffer
        {
            return None;
        }
        let unspecified = libc::sockaddr { sa_family: libc::AF_UNSPEC as libc::sa_family_t, sa_data: [0; 14] };
        let length = std::mem::size_of::<libc::sockaddr>() as libc::socklen_t;
        // SAFETY: `unspecified` is a valid sockaddr of `length` bytes for the duration of the call.
        if unsafe { libc::connect(fd, &unspecified, length) } < 0 {
            return None;
        }
        Some(self)
    }

    pub fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // The descriptor closes right after (socket2::Socket's drop), leaving the epoll with it.
        self.reactor.release(self.token);
    }
}

/// connect(2) on a non-blocking socket: EINPROGRESS is the normal answer.
fn start_connect(fd: RawFd, target: &SockAddr) -> io::Result<()> {
    // SAFETY: `target` points to a valid address of `target.len()` bytes.
    if unsafe { libc::connect(fd, target.as_ptr().cast(), target.len()) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EINPROGRESS) => Ok(()),
        _ => Err(error),
    }
}

/// The connection's TCP state, from the first byte of TCP_INFO (the kernel copies no more).
fn tcp_state(fd: RawFd) -> Option<u8> {
    let mut state = 0u8;
    let mut length: libc::socklen_t = 1;
    // SAFETY: the kernel writes at most `length` (1) bytes to `state` and updates `length`.
    let result =
        unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut state as *mut u8).cast(), &mut length) };
    (result == 0 && length == 1).then_some(state)
}

// recv(2) and send(2) as bare system calls: glibc's wrappers are thread-cancellation points,
// and their bookkeeping around every call showed in profiles (about 2 % of the engine's CPU
// with keep-alive). The engine never cancels threads.

/// recv(2): bytes read, or -1 with errno set.
fn recv(fd: RawFd, buf: &mut [u8]) -> isize {
    let (pointer, length) = (buf.as_mut_ptr() as libc::c_long, buf.len() as libc::c_long);
    // SAFETY: `buf` is valid for writes of its length; no source address is asked for (null).
    // Every argument is passed as a full register (c_long), as the kernel reads them.
    unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd as libc::c_long,
            pointer,
            length,
            0 as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
        ) as isize
    }
}

/// send(2) with MSG_NOSIGNAL (a closed peer is an error to count, not a SIGPIPE): bytes
/// written, or -1 with errno set.
fn send(fd: RawFd, buf: &[u8]) -> isize {
    let (pointer, length) = (buf.as_ptr() as libc::c_long, buf.len() as libc::c_long);
    let flags = libc::MSG_NOSIGNAL as libc::c_long;
    // SAFETY: `buf` is valid for reads of its length; no destination address is given (null).
    unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd as libc::c_long,
            pointer,
            length,
            flags,
            0 as libc::c_long,
            0 as libc::c_long,
        ) as isize
    }
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.reactor.poll_ready(this.token, Direction::Read, cx));
            let unfilled = buf.initialize_unfilled();
            let n = recv(this.fd(), unfilled);
            if n >= 0 {
                let n = n as usize;
                // A short read drained the socket: wait for its next event instead of an EAGAIN.
                if n < unfilled.len() {
                    this.reactor.clear_ready(this.token, Direction::Read);
                }
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::WouldBlock => this.reactor.clear_ready(this.token, Direction::Read),
                io::ErrorKind::Interrupted => {}
                _ => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            ready!(this.reactor.poll_ready(this.token, Direction::Write, cx));
            let n = send(this.fd(), buf);
            if n >= 0 {
                let n = n as usize;
                if n < buf.len() {
                    this.reactor.clear_ready(this.token, Direction::Write);
                }
                return Poll::Ready(Ok(n));
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::WouldBlock => this.reactor.clear_ready(this.token, Direction::Write),
                io::ErrorKind::Interrupted => {}
                _ => return Poll::Ready(Err(error)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket.shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn run<F: std::future::Future>(test: F) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        tokio::task::LocalSet::new().block_on(&runtime, test)
    }

    /// Accepts one connection, answers "pong" to "ping", then half-closes (as a server that
    /// closes after its response) and reports how the client's side of the connection ended.
    fn serve_once(listener: &TcpListener) -> std::thread::JoinHandle<(u16, std::io::Result<usize>)> {
        let listener = listener.try_clone().unwrap();
        std::thread::spawn(move || {
            let (mut stream, peer) = listener.accept().unwrap();
            let mut ping = [0; 4];
            stream.read_exact(&mut ping).unwrap();
            stream.write_all(b"pong").unwrap();
            stream.shutdown(Shutdown::Write).unwrap();
            // Ok(0) is the client's FIN; a reset would be an error.
            let mut rest = [0; 1];
            (peer.port(), stream.read(&mut rest))
        })
    }

    async fn exchange(socket: &mut Socket) {
        socket.connected().await.unwrap();
        socket.write_all(b"ping").await.unwrap();
        let mut pong = [0; 4];
        socket.read_exact(&mut pong).await.unwrap();
        assert_eq!(&pong, b"pong");
        let mut end = [0; 1];
        assert_eq!(socket.read(&mut end).await.unwrap(), 0, "the server's FIN");
    }

    #[test]
    fn a_finished_socket_connects_again_and_the_server_sees_a_normal_close_each_time() {
        const ROUNDS: usize = 5;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        run(async {
            let reactor = Reactor::new().unwrap();
            let mut spare: Option<Socket> = None;
            let (mut ports, mut reused) = (Vec::new(), 0);
            for _ in 0..ROUNDS {
                let server = serve_once(&listener);
                reused += usize::from(spare.is_some());
                let mut socket = Socket::connect(&reactor, addr, spare.take()).unwrap();
                exchange(&mut socket).await;
                assert!(socket.socket.tcp_nodelay().unwrap(), "TCP_NODELAY outlives a reconnect");
                // On loopback our FIN is acknowledged inside shutdown(), unless the kernel defers
                // its network work (a loaded machine): then the socket is closed instead.
                spare = socket.finish(8);
                let (port, client_end) = server.join().unwrap();
                assert_eq!(client_end.unwrap(), 0, "the server read a FIN, not a reset");
                ports.push(port);
            }
            assert!(reused >= ROUNDS / 2, "only {reused} of {} connections on a reused socket", ROUNDS - 1);
            ports.sort();
            ports.dedup();
            assert_eq!(ports.len(), ROUNDS, "every connection has its own client port");
        });
    }

    #[test]
    fn a_connection_the_server_has_not_closed_is_closed_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut ping = [0; 4];
            stream.read_exact(&mut ping).unwrap();
            let mut rest = [0; 1];
            // The stream is handed back, not dropped: a server thread that closed as soon as it
            // read the FIN could close before finish() looks (the client's socket then closed).
            let read = stream.read(&mut rest);
            (stream, read)
        });
        run(async {
            let reactor = Reactor::new().unwrap();
            let mut socket = Socket::connect(&reactor, addr, None).unwrap();
            socket.connected().await.unwrap();
            socket.write_all(b"ping").await.unwrap();
            assert!(socket.finish(0).is_none(), "still open on the server's side");
        });
        let (_stream, read) = server.join().unwrap();
        assert_eq!(read.unwrap(), 0, "the server read a FIN");
    }

    #[test]
    fn a_refused_connect_reports_the_kernels_error() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        run(async {
            let reactor = Reactor::new().unwrap();
            let socket = Socket::connect(&reactor, port, None).unwrap();
            assert_eq!(socket.connected().await.unwrap_err().kind(), io::ErrorKind::ConnectionRefused);
        });
    }
}
