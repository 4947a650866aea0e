<?php
// GET: the login form, with a CSRF token kept in the session (one per session, made at its
// first form). POST (user, password, csrf): the token first (403 "bad token"), then the
// password (401); on success a new session id (no fixation) holding the user, and a 302 to
// the account page.
declare(strict_types=1);

require __DIR__ . '/journey.php';

jr_allow('GET', 'POST');
jr_session(true);

if ($_SERVER['REQUEST_METHOD'] === 'GET') {
    if (!isset($_SESSION['csrf'])) {
        $_SESSION['csrf'] = bin2hex(random_bytes(16));
    }
    $token = htmlspecialchars($_SESSION['csrf']);
    header('Content-Type: text/html; charset=utf-8');
    echo <<<HTML
    <!DOCTYPE html>
    <html><head><title>Log in</title></head>
    <body>
    <form method="post" action="/login.php">
    <input type="hidden" name="csrf" value="$token">
    <label>User <input type="text" name="user"></label>
    <label>Password <input type="password" name="password"></label>
    <button type="submit">Log in</button>
    </form>
    </body></html>

    HTML;
    exit;
}

$token = jr_field('csrf');
if (!isset($_SESSION['csrf']) || $token === '' || !hash_equals($_SESSION['csrf'], $token)) {
    jr_text(403, 'bad token');
}
$user = jr_check_password(jr_field('user'), jr_field('password'));
if ($user === null) {
    jr_text(401, 'bad user or password');
}
session_regenerate_id(true);
[$_SESSION['user_id'], $_SESSION['user']] = $user;
jr_redirect('/account.php');
