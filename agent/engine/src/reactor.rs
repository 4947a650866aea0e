//! Readiness of the engine's plain TCP sockets, from an epoll instance of the engine's own
//! (itself registered in tokio's reactor, so one thread still waits in one place).
//!
//! Why not tokio's reactor: tokio remembers for good that a socket was closed (its
//! read-closed and write-closed readiness never clear), so a socket disconnected and
//! connected again would look closed forever. The engine reuses sockets between
//! connections (see `socket.rs`), so it keeps readiness itself and clears it on every
//! new connection. Readiness is tracked as tokio does: an event sets it, an operation
//! that would block (or a short read) clears it, and a task waits only when it is clear.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tokio::io::unix::AsyncFd;
use tokio::task::JoinHandle;

/// Events taken from the inner epoll per system call.
const EVENTS_PER_WAIT: usize = 256;

/// Where a socket's readiness lives: an index into the reactor's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token(usize);

/// What the kernel last said about one socket, since its connection began.
#[derive(Default)]
struct Slot {
    readable: bool,
    writable: bool,
    /// Peer closed, hang-up or error: reads (and writes) must be tried to learn which.
    read_closed: bool,
    write_closed: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

pub struct Reactor {
    epoll: RawFd,
    slots: Rc<RefCell<Slots>>,
    /// Waits for the inner epoll and wakes the tasks of the sockets that had events; it owns
    /// the epoll descriptor, which closes when the task is aborted with the reactor.
    dispatch: JoinHandle<()>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

impl Reactor {
    /// Must be called inside a tokio LocalSet: the dispatch task is a local task.
    pub fn new() -> io::Result<Rc<Reactor>> {
        // SAFETY: epoll_create1 has no memory arguments; a valid result is a new descriptor we own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just created and is owned by nothing else; the OwnedFd keeps it open
        // for as long as the AsyncFd lives.
        let epoll = unsafe { AsyncFd::register_with_interest(OwnedFd::from_raw_fd(fd), tokio::io::Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        let slots = Rc::new(RefCell::new(Slots::default()));
        let dispatch = tokio::task::spawn_local(dispatch(epoll, Rc::clone(&slots)));
        Ok(Rc::new(Reactor { epoll: fd, slots, dispatch }))
    }

    /// Watches `fd` (edge-triggered) until it is closed; its readiness starts clear.
    pub fn register(&self, fd: RawFd) -> io::Result<Token> {
        let token = {
            let mut slots = self.slots.borrow_mut();
            match slots.free.pop() {
                Some(index) => {
                    slots.slots[index] = Slot::default();
                    index
                }
                None => {
                    slots.slots.push(Slot::default());
                    slots.slots.len() - 1
                }
            }
        };
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token as u64,
        };
        // SAFETY: both descriptors are open and `event` outlives the call.
        if unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, &mut event) } < 0 {
            self.slots.borrow_mut().free.push(token);
            return Err(io::Error::last_os_error());
        }
        Ok(Token(token))
    }

    /// Gives the slot back; the caller closes the descriptor, which leaves the epoll with it.
    pub fn release(&self, token: Token) {
        let mut slots = self.slots.borrow_mut();
        slots.slots[token.0] = Slot::default();
        slots.free.push(token.0);
    }

    /// A new connection on the socket: nothing said about the old one holds any more.
    pub fn clear(&self, token: Token) {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots.slots[token.0];
        (slot.readable, slot.writable, slot.read_closed, slot.write_closed) = (false, false, false, false);
    }

    /// Ready if the socket may be read (written) now; otherwise the task is woken at its next event.
    pub fn poll_ready(&self, token: Token, direction: Direction, cx: &mut Context<'_>) -> Poll<()> {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots.slots[token.0];
        let (ready, waiter) = match direction {
            Direction::Read => (slot.readable || slot.read_closed, &mut slot.reader),
            Direction::Write => (slot.writable || slot.write_closed, &mut slot.writer),
        };
        if ready {
            return Poll::Ready(());
        }
        match waiter {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => *waiter = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The socket would block (or was drained): wait for its next event. Closed stays closed
    /// until the next connection, as the kernel says it only once.
    pub fn clear_ready(&self, token: Token, direction: Direction) {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots.slots[token.0];
        match direction {
            Direction::Read => slot.readable = false,
            Direction::Write => slot.writable = false,
        }
    }

    /// True once the socket reported a hang-up or an error (a failed connect).
    pub fn hung_up(&self, token: Token) -> bool {
        self.slots.borrow().slots[token.0].write_closed
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        self.dispatch.abort();
    }
}

/// Takes the inner epoll's events and wakes their tasks for as long as there are any; only
/// when there are none does the wait go back to tokio's epoll.
///
/// While the load keeps the sockets busy, the tasks woken send their next requests and more
/// responses arrive meanwhile. Looking again once those tasks have run costs one epoll_wait;
/// waiting for tokio to report the inner epoll readable would cost two (tokio's, then ours)
/// for the same events.
async fn dispatch(epoll: AsyncFd<OwnedFd>, slots: Rc<RefCell<Slots>>) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_WAIT];
    loop {
        let Ok(mut guard) = epoll.readable().await else {
            return;
        };
        loop {
            // SAFETY: `events` has room for EVENTS_PER_WAIT entries; timeout 0 never blocks.
            let n = unsafe { libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), EVENTS_PER_WAIT as i32, 0) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if n == 0 {
                guard.clear_ready();
                break;
            }
            wake(&slots, &events[..n as usize]);
            run_woken_tasks_first().await;
        }
    }
}

/// Yields once, behind the tasks already queued. Not `tokio::task::yield_now`, which defers
/// the wake-up until the runtime has polled its drivers (an epoll_wait of tokio's): this
/// wake only queues the task again in the LocalSet, and the runtime still polls its drivers
/// every 61 tasks (the LocalSet's tick), so timers and other I/O are never starved.
async fn run_woken_tasks_first() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

fn wake(slots: &RefCell<Slots>, events: &[libc::epoll_event]) {
    const READ: u32 = libc::EPOLLIN as u32;
    const WRITE: u32 = libc::EPOLLOUT as u32;
    const HANG_UP: u32 = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
    const READ_CLOSED: u32 = HANG_UP | libc::EPOLLRDHUP as u32;
    let mut slots = slots.borrow_mut();
    for event in events {
        let mask = event.events;
        let Some(slot) = slots.slots.get_mut(event.u64 as usize) else {
            continue;
        };
        slot.readable |= mask & READ != 0;
        slot.read_closed |= mask & READ_CLOSED != 0;
        slot.writable |= mask & WRITE != 0;
        slot.write_closed |= mask & HANG_UP != 0;
        // Waking only queues the task (a LocalSet task runs after this one yields).
        if mask & (READ | READ_CLOSED) != 0 {
            if let Some(reader) = slot.reader.take() {
                reader.wake();
            }
        }
        if mask & (WRITE | HANG_UP) != 0 {
            if let Some(writer) = slot.writer.take() {
                writer.wake();
            }
        }
    }
}
