//! A redirect's next hop for a user (redirect.rs has the rules): the response's cookies into
//! the user's jar, the Location placed on a plan target, and the hop's request written into
//! the user's buffer. Apart from redirect.rs so that the rules depend on no user or job.

use url::Url;

use crate::capture::Inspection;
use crate::journey::Journeys;
use crate::redirect::{method_of, rewrite, same_origin, write_hop, Hop, HopRequest};
use crate::user::UserState;

/// What follows a response of `status` (kept in `inspection`) to the request in
/// `user.write_buf`, sent to `from`: None when it is no redirect to follow (not a redirect
/// status, or no Location); else the hop, its request written into `user.write_buf` (`spare`
/// takes the previous one), or why the hop is refused. The response's Set-Cookie lines go
/// into the user's jar first, for `from`.
pub fn next_hop(
    journeys: &Journeys,
    (status, inspection): (u16, &Inspection),
    from: &Url,
    user: &mut UserState,
    spare: &mut Vec<u8>,
    now_ms: u64,
) -> Option<Result<Hop, String>> {
    let rewrite = rewrite(status, method_of(&user.write_buf))?;
    let location = inspection.header_lines().find(|(name, _)| name.eq_ignore_ascii_case(b"location"))?.1;
    if let Some(jar) = &mut user.jar {
        for (_, value) in inspection.header_lines().filter(|(name, _)| name.eq_ignore_ascii_case(b"set-cookie")) {
            jar.store(value, from, now_ms);
        }
    }
    let hop = match journeys.origins.locate(from, location) {
        Ok(hop) => hop,
        Err(message) => return Some(Err(message)),
    };
    let cookie = match &mut user.jar {
        Some(jar) => jar.header_for_url(&hop.url, now_ms),
        None => &[],
    };
    let cross_origin = !same_origin(from, &hop.url);
    let request =
        HopRequest { rewrite, path: hop.path_and_query(), host: &journeys.hosts[hop.target], cookie, cross_origin };
    if let Err(message) = write_hop(&user.write_buf, request, spare) {
        return Some(Err(message));
    }
    std::mem::swap(spare, &mut user.write_buf);
    Some(Ok(hop))
}
