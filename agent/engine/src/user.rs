//! A user's state and the one walk of a session that the closed model (closed.rs) and the
//! open model's users (visitors.rs) share.
//!
//! State per user (closed clients, users, open-model users walking a session) and its
//! bounds: variables (vars.rs: at most 4 KiB of values), a cookie jar when the job has
//! journeys and cookies on (jar.rs: 16 cookies and 8 KiB by default, at most 64 and 64 KiB),
//! the round of its session (`${iteration}`), and the buffers a journey request is built and
//! judged in — kept between requests, but shrunk back to RETAINED_BUFFER_BYTES after an
//! outsized request, so a user holds at most that much of them between requests.

use crate::feed::Take;
use crate::jar::Jar;
use crate::job::{Job, Session, SessionStep};
use crate::journey::OnFail;
use crate::rng::Rng;
use crate::shared::Shared;
use crate::vars::Vars;

/// What a user's request buffer (and scratch buffer) keeps between requests.
pub const RETAINED_BUFFER_BYTES: usize = 16 * 1024;

pub struct UserState {
    /// ${user}: the fleet-wide index (JobSpec.first_user + the local index).
    pub index: u64,
    pub vars: Vars,
    /// None: cookies off, or a job without journeys.
    pub jar: Option<Jar>,
    /// ${iteration}: rounds of the session's steps completed.
    pub iteration: u64,
    /// A journey request's bytes, built per request.
    pub write_buf: Vec<u8>,
    /// An extracted value or a check's rendered text.
    pub scratch: Vec<u8>,
    /// Target picks, think times and templates' random values.
    pub rng: Rng,
    /// Its row of the job's feed (feed.rs), taken when its session starts; None: no feed, or
    /// a unique feed ran out of rows (`starved`).
    pub row: Option<u32>,
    pub starved: bool,
}

impl UserState {
    /// Local user `local` of `job`, drawing from `seed`.
    pub fn new(job: &Job, local: u64, seed: u64) -> UserState {
        let journeys = job.journeys.as_ref();
        let slots = journeys.map_or(0, |j| j.variables);
        let mut user = UserState {
            index: journeys.map_or(0, |j| j.first_user).saturating_add(local),
            vars: Vars::new(slots).expect("the job checked its variables"),
            jar: journeys.and_then(|j| j.jar.map(|limits| Jar::new(limits, j.urls.len()))),
            iteration: 0,
            write_buf: Vec::new(),
            scratch: Vec::new(),
            rng: Rng::new(seed),
            row: None,
            starved: false,
        };
        user.take_row(job);
        user
    }

    /// A session starts: the user takes its row of the job's feed, if it has one.
    fn take_row(&mut self, job: &Job) {
        let Some(feed) = job.journeys.as_ref().and_then(|j| j.feed.as_ref()) else { return };
        (self.row, self.starved) = match feed.take(&mut self.rng) {
            Take::Row(row) => (Some(row), false),
            Take::Exhausted => (None, true),
        };
    }

    /// A new session, as a new user would start it: no variables, an empty jar, the next row.
    pub fn restart(&mut self, job: &Job) {
        self.take_row(job);
        self.vars.reset();
        if let Some(jar) = &mut self.jar {
            if !jar.is_empty() {
                jar.reset();
            }
        }
    }

    /// After a request: a buffer an outsized request grew goes back to RETAINED_BUFFER_BYTES.
    pub fn request_done(&mut self) {
        for buffer in [&mut self.write_buf, &mut self.scratch] {
            if buffer.capacity() > RETAINED_BUFFER_BYTES {
                buffer.clear();
                buffer.shrink_to(RETAINED_BUFFER_BYTES);
            }
        }
    }
}

/// Where a user is in its session: `once` (at the start, and again after a restart), then
/// rounds of `steps` until `rounds` of them are done (0: until the end of the run).
pub struct Walker<'s> {
    session: &'s Session,
    rounds: u32,
    in_once: bool,
    at: usize,
    done: u32,
}

impl<'s> Walker<'s> {
    /// `session` must have steps (job.rs builds no session without).
    pub fn new(session: &'s Session, rounds: u32) -> Walker<'s> {
        debug_assert!(!session.steps.is_empty());
        Walker { session, rounds, in_once: !session.once.is_empty(), at: 0, done: 0 }
    }

    /// The next step; None once the rounds are done. A completed round counts in `user`'s
    /// iteration.
    pub fn next(&mut self, user: &mut UserState) -> Option<&'s SessionStep> {
        if self.in_once {
            if let Some(step) = self.session.once.get(self.at) {
                self.at += 1;
                return Some(step);
            }
            (self.in_once, self.at) = (false, 0);
        }
        if self.at == self.session.steps.len() {
            self.done += 1;
            user.iteration += 1;
            if self.rounds > 0 && self.done >= self.rounds {
                return None;
            }
            self.at = 0;
        }
        self.at += 1;
        Some(&self.session.steps[self.at - 1])
    }

    /// The session from its start: `once`, then the steps from the first (rounds done stay done).
    pub fn restart(&mut self) {
        (self.in_once, self.at) = (!self.session.once.is_empty(), 0);
    }
}

/// What a user does after a request that ended with `then`, counted under `slot`: goes on
/// (true), or stops (false). A restart starts `user` and `walker` afresh.
pub fn follow(
    shared: &Shared,
    slot: usize,
    then: OnFail,
    user: &mut UserState,
    walker: Option<&mut Walker<'_>>,
) -> bool {
    match then {
        OnFail::Continue => true,
        OnFail::Restart => {
            user.restart(&shared.job);
            if let Some(walker) = walker {
                walker.restart();
            }
            shared.stats.borrow_mut().session_restarted(slot);
            true
        }
        OnFail::Stop => {
            shared.stats.borrow_mut().user_stopped(slot);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Think;

    fn session(once: &[usize], steps: &[usize], repeat: u32) -> Session {
        let step = |&request: &usize| SessionStep { request, think_after: Think::None };
        Session { once: once.iter().map(step).collect(), steps: steps.iter().map(step).collect(), repeat }
    }

    fn walk(walker: &mut Walker<'_>, user: &mut UserState, n: usize) -> Vec<usize> {
        (0..n).map_while(|_| walker.next(user).map(|s| s.request)).collect()
    }

    fn user() -> UserState {
        UserState {
            index: 0,
            vars: Vars::new(0).unwrap(),
            jar: None,
            iteration: 0,
            write_buf: Vec::new(),
            scratch: Vec::new(),
            rng: Rng::new(1),
            row: None,
            starved: false,
        }
    }

    #[test]
    fn once_then_rounds_of_steps_counted_as_iterations() {
        let session = session(&[9], &[1, 2], 2);
        let (mut walker, mut user) = (Walker::new(&session, session.repeat), user());
        assert_eq!(walk(&mut walker, &mut user, 10), [9, 1, 2, 1, 2]);
        assert_eq!(user.iteration, 2);
        let endless = self::session(&[], &[3], 0);
        let mut walker = Walker::new(&endless, 0);
        assert_eq!(walk(&mut walker, &mut user, 4), [3, 3, 3, 3]);
    }

    #[test]
    fn a_restart_runs_once_again_then_the_steps_from_the_first() {
        let session = session(&[7, 8], &[1, 2, 3], 0);
        let (mut walker, mut user) = (Walker::new(&session, 0), user());
        assert_eq!(walk(&mut walker, &mut user, 4), [7, 8, 1, 2]);
        walker.restart();
        assert_eq!(walk(&mut walker, &mut user, 4), [7, 8, 1, 2]);
    }

    #[test]
    fn an_outsized_request_buffer_is_shrunk_back() {
        let mut user = user();
        user.write_buf.extend_from_slice(&[b'x'; 60 * 1024]);
        user.scratch.extend_from_slice(b"small");
        user.request_done();
        assert!(user.write_buf.capacity() <= RETAINED_BUFFER_BYTES, "{}", user.write_buf.capacity());
        assert_eq!(user.scratch, b"small", "a small buffer is kept as it is");
    }
}
