# A driver (cases/clients/README.md) for Net::Stomp (Debian's libnet-stomp-perl), used as its
# SYNOPSIS shows: Net::Stomp->new({hostname, port}), connect with the CONNECT headers the
# application gives (login, passcode), then receive_frame in a loop. Net::Stomp speaks STOMP
# 1.0: it names no version (no accept-version), escapes no header and sends no heart-beat, so
# a connect offering 1.1 or 1.2 is unsupported. Net::Stomp has no thread: this driver polls it between commands (can_read, then
# receive_frame), and stops once a read finds the connection gone, rather than calling
# receive_frame again, which reconnects. It has no BEGIN, COMMIT or ABORT of its own: the
# application writes those frames with send_frame (the SYNOPSIS's "write your own frame").
# It has no WebSocket transport (IO::Socket::IP or SSL): a ws:// url is unsupported.
#
#   perl drivers/perl/net_stomp.pl
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Contract;
use Net::Stomp;
use Net::Stomp::Frame;

my ($stomp, $live, @messages);

sub header_octets {
    my ($map) = @_;
    return { map { Contract::octets($_) => Contract::octets($map->{$_}) } keys %{ $map || {} } };
}

sub report {
    my ($frame) = @_;
    my $command = $frame->command;
    if ($command eq 'MESSAGE') {
        push @messages, $frame;
        Contract::emit('message', n => $#messages, headers => Contract::headers($frame->headers),
                       body_b64 => Contract::b64($frame->body));
    } elsif ($command eq 'RECEIPT') {
        Contract::emit('receipt', id => Contract::text($frame->headers->{'receipt-id'}));
    } elsif ($command eq 'ERROR') {
        Contract::emit('error', headers => Contract::headers($frame->headers),
                       body_b64 => Contract::b64($frame->body));
    }
}

sub poll {
    return unless $live;
    while ($stomp->can_read({ timeout => 0 })) {
        my $frame = $stomp->receive_frame({ timeout => 0 });
        if ($frame) {
            report($frame);
            next;
        }
        my $connected = do { local $^W = 0; $stomp->socket->connected };
        last if $connected;
        $live = 0; # the read found the connection gone (Net::Stomp closed its socket)
        Contract::emit('disconnected');
        last;
    }
}

sub run {
    my ($op, $c) = @_;
    if ($op eq 'connect') {
        my ($host, $port) = Contract::endpoint($c->{url});
        my $version = defined $c->{version} ? $c->{version} : '1.2';
        die Contract::unsupported("STOMP $version: Net::Stomp speaks 1.0 (no accept-version, "
                                  . 'header escaping or heart-beating)') if $version ne '1.0';
        $stomp = Net::Stomp->new({ hostname => $host, port => $port });
        my %headers;
        $headers{$_} = $c->{$_} for grep { defined $c->{$_} } qw(login passcode);
        my $frame = $stomp->connect(header_octets(\%headers));
        die "no CONNECTED\n" unless $frame;
        if ($frame->command ne 'CONNECTED') {
            report($frame);
            die "connect answered " . $frame->command . "\n";
        }
        $live = 1;
        Contract::emit('connected', headers => Contract::headers($frame->headers));
        return;
    }
    die "not connected\n" unless $live;
    if ($op eq 'send') {
        my %headers = (%{ $c->{headers} || {} }, destination => $c->{destination});
        $headers{receipt} = $c->{receipt} if $c->{receipt};
        $stomp->send({ %{ header_octets(\%headers) }, body => Contract::body($c) });
    } elsif ($op eq 'subscribe') {
        $stomp->subscribe(header_octets({ destination => $c->{destination}, id => $c->{id},
                                          ack => defined $c->{ack} ? $c->{ack} : 'auto' }));
    } elsif ($op eq 'unsubscribe') {
        $stomp->unsubscribe(header_octets({ id => $c->{id} }));
    } elsif ($op eq 'ack' || $op eq 'nack') {
        my %headers = $c->{transaction} ? (transaction => Contract::octets($c->{transaction})) : ();
        $stomp->$op({ frame => $messages[$c->{message}], %headers });
    } elsif ($op eq 'begin' || $op eq 'commit' || $op eq 'abort') {
        $stomp->send_frame(Net::Stomp::Frame->new({ command => uc $op,
            headers => header_octets({ transaction => $c->{transaction} }) }));
    } elsif ($op eq 'disconnect') {
        # disconnect writes a DISCONNECT with no headers and closes the socket at once
        # (Net/Stomp.pm sub disconnect): it cannot ask a receipt nor wait for one
        die Contract::unsupported('DISCONNECT asking a receipt: Net::Stomp::disconnect '
                                  . 'sends no headers and closes at once') if $c->{receipt};
        $live = 0;
        $stomp->disconnect;
    } else {
        die Contract::unsupported("no command $op");
    }
}

Contract::serve('Net::Stomp', $Net::Stomp::VERSION, \&run, \&poll);
