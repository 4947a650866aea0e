<?php
// The logged-in user's page: a greeting by name and the number of rows in the user's cart
// (data-cart-items, for a plan to extract); anyone else is sent to the login form.
declare(strict_types=1);

require __DIR__ . '/journey.php';

jr_allow('GET');
jr_session(false);
if (!isset($_SESSION['user_id'])) {
    jr_redirect('/login.php');
}
$name = htmlspecialchars($_SESSION['user']);
$items = jr_cart_count($_SESSION['user_id']);
header('Content-Type: text/html; charset=utf-8');
echo <<<HTML
<!DOCTYPE html>
<html><head><title>Your account</title></head>
<body>
<h1>Welcome, $name</h1>
<p id="cart" data-cart-items="$items">$items items in your cart</p>
</body></html>

HTML;
